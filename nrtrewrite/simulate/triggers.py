"""The collectives an output folder claims to implement (OUT/manifest.json ``triggers``), and
where each operand lives in a rank's memory."""

from __future__ import annotations

import json
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from nrtrewrite.codes import DType, DTYPE_SIZE, EncAlgType, EncOpType, SdmaCceType
from nrtrewrite.compose.segments import even_split
from nrtrewrite.errors import (OutputError, SimulationError, ValidationError, counted,
                               json_text)
from nrtrewrite.policy import INTRA
from nrtrewrite.select import (
    HIER_LEGS, LEG_OPS, AlgoOverride, hier_split, parse_algo_override, ranks_by_node,
)
from nrtrewrite.simulate.fields import MAX_CHANNEL, Field, json_kind
from nrtrewrite.simulate.layout import Layout, Region
from nrtrewrite.topology.rings import kangaring_identity

OPS = ("ALLREDUCE", "ALLGATHER", "REDUCE_SCATTER")
ALU_TO_CCE = {"ADD": int(SdmaCceType.ADD), "MAX": int(SdmaCceType.MAX),
              "MIN": int(SdmaCceType.MIN)}


class LegLayout(NamedTuple):
    """A HIER leg's interleaved layout for one rank (:meth:`TriggerSpec.leg_layout`)."""
    group: list  # the leg's ranks (the rank's group of that leg)
    orders: dict  # its ring orders by channel (ranks)
    lo: int  # the rank's slice [lo, lo + span) of the trigger's element space
    span: int
    chunk: dict  # its plan's chunk
    #: a segmented layout's segments ``[lo, hi)`` by position (an all-gather or
    #: reduce-scatter leg, an all-reduce's intra legs: docs/DESIGN.md "Leg layouts"); None:
    #: interleaved over ``[lo, lo + span)`` (``inter_allr``)
    segments: tuple | None = None


def io_code(dtype: DType) -> int:
    """The in/out dtype code of descriptors (FP32R data moves as FP32, FORMATS §4/§6)."""
    return int(DType.FP32 if dtype == DType.FP32R else dtype)


def io_size(dtype: DType) -> int:
    """Bytes per element in memory (FP32R is 4-byte fp32)."""
    return DTYPE_SIZE[dtype]


@dataclass
class Footprint:
    """Where the elements of one operand live on one rank: a region and the storage offset of
    every element (``offsets``), or a contiguous byte range when ``offsets`` is None."""

    region: Region
    start: int  # storage offset of element 0 (contiguous operands)
    count: int
    dsize: int
    offsets: np.ndarray | None = None
    _intervals: list | None = field(default=None, init=False, repr=False, compare=False)

    def intervals(self) -> list[tuple[int, int]]:
        """Merged byte ranges the operand covers, ascending."""
        if self.offsets is None:
            return [(self.start, self.start + self.count * self.dsize)] if self.count else []
        if self._intervals is None:
            # sorted, not np.unique: repeated offsets (diff 0) never start a new run, and
            # np.unique's hash path is ~40x slower than a sort on large operands
            o = np.sort(self.offsets)
            if not o.size:
                self._intervals = []
                return []
            brk = np.nonzero(np.diff(o) > self.dsize)[0]
            starts = np.concatenate([[o[0]], o[brk + 1]])
            ends = np.concatenate([o[brk], [o[-1]]]) + self.dsize
            # overlapping elements (diff < dsize) stay within one run
            self._intervals = list(zip(starts.tolist(), ends.tolist()))
        return list(self._intervals)

    def byte_index(self) -> np.ndarray:
        """Storage offset of every byte, element-major (gathers and scatters)."""
        assert self.offsets is not None
        return (self.offsets[:, None] + np.arange(self.dsize, dtype=np.int64)).ravel()

    def gather(self, buf: np.ndarray) -> np.ndarray:
        if self.offsets is None:
            return buf[self.start:self.start + self.count * self.dsize].copy()
        return buf[self.byte_index()]

    def scatter(self, buf: np.ndarray, data: np.ndarray) -> None:
        if self.offsets is None:
            buf[self.start:self.start + self.count * self.dsize] = data
        else:
            buf[self.byte_index()] = data


def trigger_label(op: str, alu: str | None, dtype: str, n: int, ranks: int) -> str:
    """How the simulator names a trigger: ``ALLREDUCE ADD BF16 x4096 over 8 ranks`` (op, ALU
    op, dtype and ranks by the manifest's names, ``n`` each rank's input elements)."""
    alu_text = f" {alu}" if alu else ""
    return f"{op}{alu_text} {dtype} x{n} over {counted(ranks, 'rank')}"


def merge_intervals(ivs) -> tuple[list[int], list[int]]:
    """The union of byte ranges ``[a, b)`` as ascending, disjoint ranges (ranges that overlap
    or touch are joined), returned as two lists: starts and ends."""
    if not len(ivs):
        return [], []
    iv = np.asarray(ivs, dtype=np.int64).reshape(-1, 2)
    iv = iv[np.lexsort((iv[:, 1], iv[:, 0]))]
    a, b = iv[:, 0], iv[:, 1]
    reach = np.maximum.accumulate(b)
    new = np.ones(len(a), bool)
    new[1:] = a[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, len(a) - 1)
    return a[first].tolist(), reach[last].tolist()


def covers(starts: list[int], ends: list[int], a: int, e: int) -> bool:
    """Whether ``[a, e)`` lies inside one of the merged ranges of :func:`merge_intervals`."""
    i = bisect_right(starts, a) - 1
    return i >= 0 and e <= ends[i]


@dataclass
class TriggerSpec:
    ordinal: int
    op: str
    dtype: DType
    alu: str | None
    n: int  # num_elements: each rank's input count
    group: list[int]
    leader: int
    subgraph: str
    engine: str
    index: int
    algorithm: str
    src: dict
    dst: dict
    pgta: int
    orders: dict[int, list[int]]
    #: HIER: leg name -> {"algorithm", "groups": [(group, orders, pgta)], "buffers"}
    legs: dict = field(default_factory=dict)
    #: KANGARING: the manifest's ``kangaring`` section, per channel ``(channel, logical_path,
    #: units, duplicate)`` (:func:`_kangaring`); None for another engine
    kangaring: list | None = None
    #: SINGLE_CYCLE_RING: the manifest's ``single_cycle`` section, ``(pairs, arcs,
    #: steps_per_group)`` (:func:`_single_cycle`); None for another engine
    single_cycle: tuple | None = None
    #: HIER: the manifest's ``hier.slices``, [start, stop) of each local index's slice of an
    #: all-reduce (``[]`` for the other ops; :func:`_check_hier_slices`); None: no hier
    slices: list | None = None
    #: the manifest's own ``legs`` (FORMATS §1.1): per leg ``(name, op, algorithm,
    #: sub_type)``, held to the trigger (:func:`_check_own_legs`, :func:`check_own_legs`)
    own_legs: list = field(default_factory=list)
    #: extra scratch / gateway buffers of the trigger: [{"region", "offset", "role"}]
    #: (FORMATS §1.1); None when it has no ``buffers`` key (an empty list is another value)
    buffers: list | None = None
    #: elements a mesh / RDH scratch or gateway view may start at (channel-buffer slots, RH
    #: slots, folds, gateway views): 0, the natural blocks, the manifest's mesh ``blocks`` and
    #: RDH ``super_blocks`` (docs/DESIGN.md "Mesh and RDH")
    view_origins: frozenset = frozenset({0})
    #: the manifest's ``chunk`` (chunk_size_n, tail_chunk, pgta, channels)
    chunk: dict = field(default_factory=dict)
    #: where the manifest holds the trigger (file, ``triggers[i]``): the checks made once the
    #: operands are placed (:func:`check_chunk_groups`) name it
    where: dict = field(default_factory=dict, repr=False, compare=False)
    #: channel (a HIER leg's: (channel, its group)) -> (rank -> index in the channel's ring
    #: order, each group member's index; None when the order is not the group's ranks):
    #: :meth:`ring_hops`, once per channel
    _ring_at: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def dsize(self) -> int:
        return io_size(self.dtype)

    @property
    def io_code(self) -> int:
        return io_code(self.dtype)

    @property
    def reduce(self) -> bool:
        return self.op != "ALLGATHER"

    @property
    def cce_op(self) -> int | None:
        return ALU_TO_CCE.get(self.alu) if self.alu else None

    @property
    def in_count(self) -> int:
        return self.n

    @property
    def out_count(self) -> int:
        if self.op == "ALLGATHER":
            return self.n * len(self.group)
        if self.op == "REDUCE_SCATTER":
            return self.n // len(self.group)
        return self.n

    def ring_layout(self) -> tuple[int, int]:
        """``(span, group_elems)`` of a flat ring's chunk layout (seed 001 §2,
        nrtrewrite/compose/chunking.py): the elements the layout walks (an all-reduce's
        message, an all-gather's or reduce-scatter's group member's block of ``n`` (``n /
        group size``) elements) and how many one chunk group covers (``group size x channels x
        chunk_size_n`` for an all-reduce, ``channels x chunk_size_n`` for a block)."""
        ck = self.chunk
        per_group = ck["channels"] * ck["chunk_size_n"]
        rank_n = len(self.group)
        if self.op == "ALLREDUCE":
            return self.n, rank_n * per_group
        return (self.n if self.op == "ALLGATHER" else self.n // rank_n), per_group

    def half_of(self, start: np.ndarray, count: np.ndarray) -> np.ndarray:
        """The half-chunk (CHUNK_H0 0 / CHUNK_H1 1) that holds elements [start, start + count)
        of a flat ring's element space, from the chunk layout alone (:meth:`ring_layout`):
        an all-reduce chunks of ``chunk_size_n`` from the start of each chunk group, all-gather
        and reduce-scatter the same inside each group member's block; the last group uses
        ``tail_chunk``; each chunk is H0 then H1, ``chunk / 2`` elements each.  -1 where the
        range does not sit inside one half.

        The chunk group is ``rel // group_elems`` with no clamp to ``pgta - 1``: it is below
        ``pgta`` for every leg that reaches here.  The manifest's ``pgta`` of a RING trigger
        is seed 001 §2's ceil(span / group_elems) (:func:`check_chunk_groups`, so span <=
        pgta x group_elems), and a ring leaf has elements (a data leg's count is 1 or more,
        and so is a direct_recv's, program.py) that lie in the element space (program.py
        checks that first), so ``rel`` < span."""
        start = np.asarray(start, np.int64)
        span, group_elems = self.ring_layout()
        lo = (start // max(span, 1)) * span if self.op != "ALLREDUCE" else np.zeros_like(start)
        return _half_in(start, np.asarray(count, np.int64), lo, span, group_elems, self.chunk)

    def leg_layout(self, leg: str, rank: int) -> LegLayout | None:
        """The :class:`LegLayout` ``(group, orders, lo, span, chunk, segments)`` of
        ``rank``'s group of the all-reduce's ``inter_allr`` HIER leg (docs/DESIGN.md "Leg
        layouts", "HIER"): the leg's ranks, its ring orders by channel (ranks), and its
        *interleaved* layout, seed 001 §2's chunk groups of the ring over the group over the
        rank's slice ``[lo, lo + span)`` of the trigger's element space (``hier.slices`` of
        its local index, its place in its ``intra_redsct`` group:
        :func:`_check_hier_slices`), with its plan's ``chunk`` (:func:`_check_hier_layouts`
        holds it to the slice); None for another leg or op."""
        if self.op != "ALLREDUCE" or leg != "inter_allr" or not self.slices:
            return None
        found = self._leg_group(leg, rank)
        local = next((grp.index(rank) for grp, _o, _p in
                      self.legs.get("intra_redsct", {}).get("groups", ()) if rank in grp), None)
        if found is None or local is None or local >= len(self.slices):
            return None
        g, orders, _pgta = found
        info = self.legs[leg]
        lo, hi = self.slices[local]
        return LegLayout(info["groups"][g][0], orders, lo, hi - lo,
                         info["chunks"][info["plan_of"][g]])

    def leg_ring_layout(self, leg: str, rank: int) -> LegLayout | None:
        """The :class:`LegLayout` of ``rank``'s group of any HIER leg (docs/DESIGN.md "Leg
        layouts", "HIER"; compose/hier.py's): an all-reduce's ``inter_allr`` interleaved
        over the rank's slice (:meth:`leg_layout`), every other leg segmented: position
        ``p`` of an all-reduce's intra leg owns slice ``p`` of ``hier.slices``; of an
        all-gather's or reduce-scatter's inter leg, the block of ``c`` (``num_elements``, or
        ``num_elements`` / group size) elements of its member (``[x c, (x + 1) c)``, x its
        place in the replica group); of an intra leg, the blocks of the ranks of the inter
        group of its member.  None when the rank is in no group of the leg."""
        if leg == "inter_allr":
            return self.leg_layout(leg, rank)
        found = self._leg_group(leg, rank)
        if found is None:
            return None
        g, orders, _pgta = found
        info = self.legs[leg]
        group = info["groups"][g][0]
        chunk = info["chunks"][info["plan_of"][g]]
        if self.op == "ALLREDUCE":
            if not self.slices or len(self.slices) < len(group):
                return None
            segs = tuple((tuple(self.slices[p]),) for p in range(len(group)))
        else:
            c = self.n if self.op == "ALLGATHER" else self.n // max(len(self.group), 1)
            at = {r: x for x, r in enumerate(self.group)}
            if leg.startswith("intra"):
                of = {r: grp for name, lg in self.legs.items() if name.startswith("inter")
                      for grp, _o, _p in lg["groups"] for r in grp}
                if any(r not in of for r in group):
                    return None
                segs = tuple(tuple((at[x] * c, (at[x] + 1) * c) for x in of[r] if x in at)
                             for r in group)
            else:
                segs = tuple(((at[r] * c, (at[r] + 1) * c),) if r in at else ()
                             for r in group)
        return LegLayout(group, orders, 0, 0, chunk, segs)

    @staticmethod
    def leg_half_of(layout: LegLayout, start: np.ndarray, count: np.ndarray) -> np.ndarray:
        """:meth:`half_of` in a HIER leg's layout: the interleaved one of :meth:`leg_layout`,
        or a segmented one of :meth:`leg_ring_layout` (``segments``)."""
        start = np.asarray(start, np.int64)
        chunk = layout.chunk
        if layout.segments is not None:
            _pos, lo, span = _segment_of(layout.segments, start)
            return _half_in(start, np.asarray(count, np.int64), lo, span,
                            chunk["channels"] * chunk["chunk_size_n"], chunk)
        return _half_in(start, np.asarray(count, np.int64),
                        np.full(start.size, layout.lo, np.int64), layout.span,
                        len(layout.group) * chunk["channels"] * chunk["chunk_size_n"], chunk)

    @staticmethod
    def leg_chunk_of(layout: LegLayout, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`chunk_of` in a HIER leg's layout (the interleaved one of :meth:`leg_layout`,
        or a segmented one of :meth:`leg_ring_layout`): the chunk group and the position in
        the leg's group of the member whose chunk it is."""
        group, chunk = layout.group, layout.chunk
        if layout.segments is not None:
            # a segment is cut like a ring block: chunk groups of channels x chunk_size_n
            pos, lo, _span = _segment_of(layout.segments, np.asarray(start, np.int64))
            per_group = max(chunk["channels"] * chunk["chunk_size_n"], 1)
            return (np.asarray(start, np.int64) - lo) // per_group, pos
        rel = np.asarray(start, np.int64) - layout.lo
        group_elems = max(len(group) * chunk["channels"] * chunk["chunk_size_n"], 1)
        g = rel // group_elems
        c = np.maximum(np.where(g == chunk["pgta"] - 1, chunk["tail_chunk"],
                                chunk["chunk_size_n"]), 1)
        return g, ((rel - g * group_elems) // c) % len(group)

    def chunk_of(self, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The chunk group and the chunk position (the index in the replica group of the
        member whose chunk, or block, it is) of element ``start`` of a flat ring's element
        space, in the chunk layout of :meth:`half_of`: an all-reduce's chunk group g holds,
        per channel, the chunks of positions 0 .. group size - 1 in turn; an all-gather's or
        a reduce-scatter's position is the block of ``n`` (``n / group size``) elements the
        element lies in.  The group is below ``pgta``, unclamped, as in :meth:`half_of`.
        An all-reduce's is :meth:`leg_chunk_of` over the whole message: the same chunk groups
        of ``group size x channels x chunk_size_n`` elements from element 0."""
        start = np.asarray(start, np.int64)
        if self.op == "ALLREDUCE":
            return self.leg_chunk_of(LegLayout(self.group, self.orders, 0, self.n, self.chunk),
                                     start)
        span, group_elems = (max(v, 1) for v in self.ring_layout())
        pos = start // span
        return (start - pos * span) // group_elems, pos

    def ring_hops(self, channel: int, rank: int,
                  layout: LegLayout | None = None) -> np.ndarray | None:
        """For each member of the replica group (by position), how many hops ahead of
        ``rank`` it is on ``channel``'s ring: its index in ``rank``'s ``user_ranks`` (seed
        001 §1, the ring order rotated to start at ``rank``); None when ``rank`` is not on
        that channel's ring, or the ring order is not the group's ranks once each.  With
        ``layout`` (a HIER leg's, :meth:`leg_layout`): for each member of the leg's group, on
        the leg's ring order of ``channel`` (each position of the group once: checked when the
        manifest is read, :func:`_resolve_hier`)."""
        group, orders = (self.group, self.orders) if layout is None else layout[:2]
        key = channel if layout is None else (channel, tuple(group))
        if key not in self._ring_at:
            order = orders.get(channel)
            at = {r: i for i, r in enumerate(order or ())}
            ok = bool(order) and len(at) == len(order) and set(at) == set(group)
            self._ring_at[key] = (at, np.array([at[r] for r in group], np.int64)
                                  if ok else None)
        at, member_at = self._ring_at[key]
        if member_at is None or rank not in at:
            return None
        return (member_at - at[rank]) % member_at.size

    def pos(self, rank: int) -> int:
        return self.group.index(rank)

    def _leg_group(self, leg: str | None, rank: int):
        """``(g, orders, pgta)`` of ``rank``'s group of HIER leg ``leg``: its index in the
        leg's ``groups``, its ring orders by channel and its plan's pgta; None if none."""
        for g, (group, orders, pgta) in enumerate((self.legs.get(leg) or {}).get("groups", ())):
            if rank in group:
                return g, orders, pgta
        return None

    def successor(self, channel: int, rank: int, leg: str | None = None) -> int | None:
        """The ring successor of ``rank`` on ``channel`` (of its group of HIER leg ``leg``)."""
        found = self._leg_group(leg, rank) if self.legs else None
        orders = found[1] if found else self.orders
        order = orders.get(channel)
        if not order or rank not in order:
            return None
        return order[(order.index(rank) + 1) % len(order)]

    def kangaring_unit(self, channel: int, rank: int, leg: str | None = None):
        """``(unit, key)``: the KANGARING unit that holds ``rank`` on ``channel`` (of its group
        of HIER leg ``leg``), as ranks [primary, secondaries...], with the manifest key that
        lists it; None when the trigger (or that leg) is no KANGARING or no unit holds it."""
        at = self.where.get("field") or "triggers"
        if self.legs:
            found = self.legs.get(leg)
            if not found or found.get("algorithm") != "KANGARING":
                return None
            for g, (group, _orders, _pgta) in enumerate(found["groups"]):
                if rank in group:
                    k = found["plan_of"][g]
                    for i, (ch, _path, units, _dup) in enumerate(found["kangaring"][g] or ()):
                        if ch == channel:
                            for unit in units:
                                ranks = [group[p] for p in unit if 0 <= p < len(group)]
                                if rank in ranks:
                                    return ranks, (f"{at}.hier.legs[{found['at']}]."
                                                   f"plans[{k}].kangaring[{i}].units")
            return None
        for i, (ch, _path, units, _dup) in enumerate(self.kangaring or ()):
            if ch == channel:
                for unit in units:
                    if rank in unit:
                        return list(unit), f"{at}.kangaring[{i}].units"
        return None

    def entry_algorithm(self, leg: str | None) -> str:
        """What an entry of this trigger runs: the trigger's algorithm, or a HIER leg's."""
        if self.legs and leg in self.legs:
            return self.legs[leg]["algorithm"]
        return self.algorithm

    def entry_channels(self, leg: str | None, rank: int) -> tuple[list[int], str, str] | None:
        """The channel ids ``rank``'s entry of this trigger (of its HIER leg ``leg``) runs, if
        its engine fixes them (:data:`EVERY_CHANNEL_ENGINES`): the trigger's ``channels``, or
        those of the plan ``rank``'s group of the leg runs (FORMATS §1.1: a plan's channels
        are the channels its groups run), with the manifest key that lists them and what they
        are, for the message; None for another engine."""
        field = self.where.get("field") or "triggers"
        if not self.legs:
            if self.algorithm not in EVERY_CHANNEL_ENGINES:
                return None
            return sorted(self.orders), f"{field}.channels", f"trigger {self.ordinal}'s channels"
        found = self.legs.get(leg)
        if found is None or found["algorithm"] not in EVERY_CHANNEL_ENGINES:
            return None
        if (mine := self._leg_group(leg, rank)) is None:
            return None
        g, orders, _ = mine
        i, k = found["at"], found["plan_of"][g]
        return (sorted(orders), f"{field}.hier.legs[{i}].plans[{k}].channels",
                f"the channels of hier.legs[{i}].plans[{k}], the plan of rank {rank}'s "
                f"group hier.legs[{i}].groups[{g}],")

    def entry_pgta(self, leg: str | None, rank: int) -> int:
        found = self._leg_group(leg, rank) if self.legs else None
        return found[2] if found else self.pgta

    def leg_buffers(self) -> list[tuple[str, int]]:
        """(region kind, byte offset) of the HIER legs' scratch / gateway buffers."""
        found = {(str(b["region"]), int(b["offset"])) for leg in self.legs.values()
                 for b in leg.get("buffers", ())}
        found |= {(str(b["region"]), int(b["offset"])) for b in self.buffers or ()}
        return sorted(found)

    def label(self) -> str:
        return trigger_label(self.op, self.alu, self.dtype.name, self.n, len(self.group))

    def footprints(self, layout: Layout) -> tuple[Footprint, Footprint]:
        """The src and dst operands on any rank (the layout is the same on every rank).  Both
        are placed first, src then dst (:meth:`_place`: every check, from the manifest's
        numbers alone), so nothing is allocated per element for an operand larger than its
        var: a dst is at most its var's elements, and a src, 1, 1 / group size or group size
        times its dst (FORMATS §1.1), at most the group size times that."""
        src, dst = (self._footprint(*p) for p in self.place(layout))
        return src, dst

    def place(self, layout: Layout) -> list[tuple[Region, int, int | tuple]]:
        """The src and dst operands placed (:meth:`_place`), every check made; nothing is
        allocated."""
        return [self._place(layout, which) for which in ("src", "dst")]

    def _footprint(self, region: Region, count: int, placed: int | tuple) -> Footprint:
        """The operand :meth:`_place` placed: a linear one's bytes, or an access pattern's
        offset per element."""
        ds = self.dsize
        if isinstance(placed, int):  # a linear operand: its byte offset
            return Footprint(region, placed, count, ds)
        start, pstart, ((s0, n0), (s1, n1), (s2, n2)) = placed
        e = np.arange(count, dtype=np.int64)
        i0 = e % n0
        t = e // n0
        i1 = t % n1
        t //= n1
        i2 = t % n2
        p = t // n2
        inpart = start + (i0 * s0 + i1 * s1 + i2 * s2) * ds
        part = pstart + p
        return Footprint(region, 0, count, ds, offsets=part * region.size + inpart)

    def _place(self, layout: Layout, which: str) -> tuple[Region, int, int | tuple]:
        """(var, element count, placement) of the src or dst operand: a linear operand's
        byte offset, an access pattern's (start, partition_start, dims); a
        :class:`SimulationError` naming the manifest and the key path of the value at fault
        (``triggers[i].src.offset``, ``triggers[i].dst.ap.dims``: :meth:`operand_where`)
        when it does not fit its var.  An access pattern's extent comes from its dims
        (NEFF-LIKE.md §2: element (p, i0, i1, i2) at byte start + (i0 s0 + i1 s1 + i2 s2) x
        dtype size of partition partition_start + p), in Python integers; a dst with more
        elements in a partition than its extent has element places writes two of them to the
        same bytes, and so does one whose dims put two elements at one place
        (:func:`colliding_elements`): ``lower`` writes neither."""
        opnd = self.src if which == "src" else self.dst
        count = self.in_count if which == "src" else self.out_count

        def at(key: str) -> dict:
            return self.operand_where(which, key)
        try:
            region = layout.var_region(self.subgraph, int(opnd["var_id"]))
        except SimulationError as exc:
            raise exc.at(**at("var_id")) from None
        ds = self.dsize
        ap = opnd.get("ap")
        if ap is None:
            off = int(opnd["offset"])
            if region.kind == "sbuf":
                raise SimulationError(f"{which} operand has no access pattern but var "
                                      f"{json_text(region.name)} is a state buffer (an SBUF "
                                      "operand's place is its ap: FORMATS §1.1)", **at("ap"))
            if off < 0 or off + count * ds > region.size:
                raise SimulationError(f"{which} operand ({count} elements at offset {off}) does "
                                      f"not fit var {json_text(region.name)}", **at("offset"))
            return region, count, off
        if region.kind != "sbuf":
            raise SimulationError(f"{which} operand has an access pattern but var "
                                  f"{json_text(region.name)} is not a state buffer", **at("ap"))
        dims = tuple((int(s), int(n)) for s, n in ap["dims"])
        n0, n1, n2 = (num for _step, num in dims)
        pcount, pstart, start = int(ap["partition_count"]), int(ap["partition_start"]), int(ap["start"])
        if pcount < 1 or min(n0, n1, n2) < 1:
            raise SimulationError(f"{which} access pattern has partition_count {pcount} and "
                                  f"dims nums {n0}, {n1}, {n2}: each must be 1 or more "
                                  "(NEFF-LIKE.md §2)",
                                  **at("ap.partition_count" if pcount < 1 else "ap.dims"))
        if pcount * n0 * n1 * n2 != count:
            raise SimulationError(f"{which} access pattern covers {pcount * n0 * n1 * n2} "
                                  f"elements, the op needs {count}", **at("ap"))
        lo = sum(min(0, step * (num - 1)) for step, num in dims)
        hi = sum(max(0, step * (num - 1)) for step, num in dims)
        first, end = start + lo * ds, start + (hi + 1) * ds
        if first < 0 or end > region.size or pstart < 0 or pstart + pcount > region.partitions:
            raise SimulationError(f"{which} access pattern runs outside var "
                                  f"{json_text(region.name)}: "
                                  f"bytes [{first}, {end}) of partitions [{pstart}, "
                                  f"{pstart + pcount}), the var has {region.size} bytes x "
                                  f"{region.partitions} partitions", **at("ap"))
        if which == "dst" and n0 * n1 * n2 > hi - lo + 1:
            raise SimulationError(f"dst access pattern writes {n0 * n1 * n2} elements a "
                                  f"partition into the {hi - lo + 1} element places of its "
                                  f"extent (bytes [{first}, {end})): two of them would write "
                                  "the same bytes", **at("ap.dims"))
        if which == "dst" and (same := colliding_elements(dims)) is not None:
            a, b, q = same
            raise SimulationError(f"dst access pattern writes elements {a} and {b} to the "
                                  f"same bytes [{start + q * ds}, {start + (q + 1) * ds}) of "
                                  f"partition {pstart}: the result would depend on the order "
                                  "of the writes (docs/DESIGN.md \"Buffers and data flow\")",
                                  **at("ap.dims"))
        return region, count, (start, pstart, dims)

    def operand_where(self, which: str, key: str) -> dict:
        """Where the manifest holds ``key`` of the src or dst operand (``which``): its file and
        key path, ``triggers[i].src.offset`` (the list's position, as the other checks of
        a trigger's values name it; :func:`check_triggers` sets :attr:`where`)."""
        path = f"{which}.{key}"
        if not self.where.get("field"):
            return dict(field=path, trigger=self.ordinal)
        return dict(file=self.where.get("file") or None, field=f"{self.where['field']}.{path}")


def _half_in(start: np.ndarray, count: np.ndarray, lo: np.ndarray, span: "int | np.ndarray",
             group_elems: int, chunk: dict) -> np.ndarray:
    """The half-chunk (0 / 1, -1: none) holding elements [start, start + count) of a ring
    layout over ``[lo, lo + span)`` whose chunk groups cover ``group_elems`` each, chunked by
    ``chunk`` (TriggerSpec.half_of)."""
    stop = start + count
    if np.all(np.asarray(span) <= 0) or group_elems <= 0:
        return np.full(start.size, -1, np.int64)
    tail, pgta = chunk["tail_chunk"], chunk["pgta"]
    rel = start - lo
    g = rel // group_elems
    c = np.where(g == pgta - 1, tail, chunk["chunk_size_n"])
    within = rel - g * group_elems
    h2 = np.maximum(c // 2, 1)
    k = within % np.maximum(c, 1)  # offset inside the chunk
    half = k // h2
    end = (rel - k) + (half + 1) * h2  # end of that half (clamped to the block / message)
    ok = (c >= 2) & (half <= 1) & (stop - lo <= np.minimum(end, span)) & (rel >= 0)
    return np.where(ok, half, -1)


def _segment_of(segments: tuple,
                start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(position, lo, length)`` of the segment ``[lo, lo + length)`` of a segmented leg
    layout (:attr:`LegLayout.segments`) that holds each element ``start``; position -1 and
    length 0 where none does (segments of one layout do not overlap: docs/DESIGN.md "Leg
    layouts")."""
    flat = sorted((a, b, p) for p, segs in enumerate(segments) for a, b in segs if b > a)
    if not flat:
        return (np.full(start.size, -1, np.int64), start.copy(),
                np.zeros(start.size, np.int64))
    lo, hi, pos = (np.array(x, np.int64) for x in zip(*flat))
    k = np.clip(np.searchsorted(lo, start, side="right") - 1, 0, lo.size - 1)
    inside = (start >= lo[k]) & (start < hi[k])
    return (np.where(inside, pos[k], -1), np.where(inside, lo[k], start),
            np.where(inside, hi[k] - lo[k], 0))


def _bezout(a: int, b: int) -> tuple[int, int, int]:
    """(g, x, y) with g = gcd(a, b) > 0 and a x + b y = g (a, b not both 0)."""
    x0, y0, x1, y1 = 1, 0, 0, 1
    r0, r1 = abs(a), abs(b)
    while r1:
        q = r0 // r1
        r0, r1 = r1, r0 - q * r1
        x0, x1 = x1, x0 - q * x1
        y0, y1 = y1, y0 - q * y1
    return r0, x0 * (1 if a >= 0 else -1), y0 * (1 if b >= 0 else -1)


def _bounded_pair(sa: int, ma: int, sb: int, mb: int, r: int) -> tuple[int, int] | None:
    """Integers (x, y), |x| <= ma and |y| <= mb, with sa x + sb y = r and not both 0; None
    if there are none (sa, sb non-zero).  The solutions are (x0 + t sb / g, y0 - t sa / g)
    for integer t: each bound is an interval of t."""
    g, u, v = _bezout(sa, sb)
    if r % g:
        return None
    x0, y0, p, q = u * (r // g), v * (r // g), sb // g, -(sa // g)
    lo, hi = None, None
    for base, step, m in ((x0, p, ma), (y0, q, mb)):  # -m <= base + t step <= m
        a, b = (-m - base, m - base) if step > 0 else (base - m, base + m)
        step = abs(step)  # (t |step| in [a, b])
        t0, t1 = -(-a // step), b // step
        lo, hi = (t0, t1) if lo is None else (max(lo, t0), min(hi, t1))
    ts = [t for t in (lo, lo + 1) if t <= hi and (r or t)]  # (r = 0: t = 0 is (0, 0))
    return (x0 + ts[0] * p, y0 + ts[0] * q) if ts else None


def colliding_elements(dims) -> tuple[int, int, int] | None:
    """Two elements of one partition of an access pattern with ``dims`` ((step, num) x 3,
    innermost first) at the same element place, ``(a, b, q)``: elements a < b (i0 + n0 (i1
    + n1 i2)), both at start + q x dtype size; None if every element has a place of its own.

    Without enumerating the elements: two coincide when a difference d of indices, each
    |d_k| <= n_k - 1 and not all 0, has d0 s0 + d1 s1 + d2 s2 = 0.  A dim of step 0 and num
    2 or more gives one at once; over two dims (nums 2 or more, steps not 0) the solutions
    are the multiples of (s1 / g, -s0 / g), g = gcd(s0, s1); over three, each d_c of the dim
    of the fewest elements, 0 .. n_c - 1 (-d is a solution with d), leaves a two-dim
    equation solved the same way: at most the cube root of the elements a partition has
    steps, and those are at most the extent's places (checked before: a few thousand)."""
    nums = [num for _step, num in dims]
    act = [k for k in range(3) if nums[k] > 1]
    d = None
    for k in act:
        if dims[k][0] == 0:
            d = [int(j == k) for j in range(3)]
            break
    if d is None and len(act) >= 2:
        c = min(act, key=lambda k: nums[k]) if len(act) == 3 else None
        ka, kb = [k for k in act if k != c]
        (sa, na), (sb, nb) = dims[ka], dims[kb]
        for dc in range(nums[c] if c is not None else 1):
            xy = _bounded_pair(sa, na - 1, sb, nb - 1, -dc * dims[c][0] if dc else 0)
            if xy is not None:  # (never (0, 0): dc = 0 asks for another, dc > 0 has r != 0)
                d = [0, 0, 0]
                d[ka], d[kb] = xy
                if c is not None:
                    d[c] = dc
                break
    if d is None:
        return None
    i = [max(0, -x) for x in d]  # the two index triples: i and i + d, both inside
    j = [a + x for a, x in zip(i, d)]
    e_i, e_j = (t[0] + nums[0] * (t[1] + nums[1] * t[2]) for t in (i, j))
    q = sum(a * step for a, (step, _num) in zip(i, dims))
    return min(e_i, e_j), max(e_i, e_j), q


def _operand(f: Field) -> dict:
    """A trigger's ``src`` or ``dst`` (FORMATS §1.1: ``var_id``, ``offset`` in bytes, ``ap``
    for SBUF operands), its types checked; the object as written."""
    f["var_id"].int()
    f["offset"].int()
    ap = f.get("ap")
    if not ap.null:
        for key in ("start", "partition_start", "partition_count"):
            ap[key].int()
        dims = ap["dims"]
        if len(dims.list()) != 3:
            raise dims.bad(f"must be 3 [step, num] pairs, not {json_kind(dims.value)}")
        for d in dims.items():
            d.ints(length=2)
    return dict(f.dict())


def _buffers(f: Field) -> list[dict]:
    """A ``buffers`` list (a flat trigger's or a HIER leg's): ``region``, ``offset`` and
    ``role`` of each, their types checked; the objects as written."""
    out = []
    for b in f.items():
        b["region"].str()
        b["offset"].int()
        b["role"].str()
        out.append(dict(b.dict()))
    return out


def _trigger_buffers(t: Field, algorithm: str) -> list[dict] | None:
    """A flat trigger's ``buffers`` (:func:`_buffers`), required on a SINGLE_CYCLE_RING
    trigger (its second views: FORMATS §1.1); None when another trigger has no such key (or
    null).  An empty list is kept apart from an absent key: FORMATS says a trigger without
    such views has no ``buffers`` key, and :func:`check_buffers` refuses ``[]``.  Read with
    its type on any SINGLE_CYCLE_RING trigger, one with a ``hier`` section too (every type is
    checked before any value: docs/CLI.md; such a trigger is then refused for its hier
    section, :func:`check_triggers`)."""
    if algorithm != "SINGLE_CYCLE_RING" and t.get("buffers").null:
        return None
    return _buffers(t["buffers"])


def _kangaring(owner: Field) -> list[tuple]:
    """The ``kangaring`` section of a KANGARING trigger or of a KANGARING HIER leg's plan
    (docs/FORMATS.md §1.1: per channel ``channel``, ``logical_path``, ``units`` [primary,
    secondaries...], ``duplicate``; a plan's ranks as positions in its groups), required, its
    types checked: per item ``(channel, logical_path, units, duplicate)``; what the values
    say is :func:`_check_kangaring`'s to check."""
    return [(k["channel"].int(0, MAX_CHANNEL), k["logical_path"].ints(0),
             [u.ints(0) for u in k["units"].items()], k["duplicate"].bool())
            for k in owner["kangaring"].items()]


def _single_cycle(owner: Field) -> tuple:
    """The ``single_cycle`` section of a SINGLE_CYCLE_RING trigger or of a SINGLE_CYCLE_RING
    HIER leg's plan (docs/FORMATS.md §1.1: ``pairs`` [CW channel, CCW channel] each,
    ``arcs`` [h_cw, h_ccw], ``steps_per_group``), required, its types checked:
    ``(pairs, arcs, steps_per_group)``; what the values say is :func:`_check_single_cycle`'s
    to check."""
    section = owner["single_cycle"]
    return ([p.ints(0, MAX_CHANNEL, length=2) for p in section["pairs"].items()],
            section["arcs"].ints(0, length=2), section["steps_per_group"].int(0))


#: A HIER leg plan's ``kangaring`` or ``single_cycle`` when the plan has one but its leg is
#: not of that engine (only a KANGARING leg's plans have ``kangaring``, a SINGLE_CYCLE_RING
#: leg's ``single_cycle``: FORMATS §1.1; refused by :func:`_resolve_hier`).
FOREIGN_SECTION = "foreign"
#: A HIER leg plan's engine sections: the leg algorithm whose plans have each, and its reader.
PLAN_SECTIONS = {"kangaring": ("KANGARING", _kangaring),
                 "single_cycle": ("SINGLE_CYCLE_RING", _single_cycle)}


def _hier_legs(t: Field) -> list[tuple]:
    """The ``hier`` section of a HIER trigger (docs/FORMATS.md §1.1), its types checked: per
    leg ``(name, algorithm, plans, groups, buffers, (channel_base, channel_ids))`` (an id
    0..31, a count 0..32: a collective has 32 channels), each plan ``(its channels as
    (channel, ring order in positions) in the manifest's order, chunk, kangaring,
    single_cycle)`` (the chunk's four keys, as a flat trigger's; a KANGARING leg's plan its
    ``kangaring`` section, :func:`_kangaring`, a SINGLE_CYCLE_RING leg's its
    ``single_cycle``, :func:`_single_cycle`; another leg's None, or :data:`FOREIGN_SECTION`
    when it has one: :data:`PLAN_SECTIONS`),
    each group ``(its ranks, its plan's index)``; what the numbers say is
    :func:`_resolve_hier`'s to check."""
    hier = t.get("hier")
    if hier.null:
        return []
    out = []
    for leg in hier["legs"].items():
        algorithm = leg["algorithm"].str()
        plans = [([(c["channel"].int(0, MAX_CHANNEL), c["order"].ints())
                   for c in plan["channels"].items()],
                  {k: plan["chunk"][k].int() for k in CHUNK_KEYS},
                  *(read(plan) if algorithm == owner else
                    None if plan.get(key).null else FOREIGN_SECTION
                    for key, (owner, read) in PLAN_SECTIONS.items()))
                 for plan in leg["plans"].items()]
        groups = [(g["group"].ints(0), g["plan"].int()) for g in leg["groups"].items()]
        out.append((leg["name"].str(), algorithm, plans, groups,
                    _buffers(leg["buffers"]),
                    (leg["channel_base"].int(0, MAX_CHANNEL),
                     leg["channel_ids"].int(0, MAX_CHANNEL + 1))))
    return out


def _hier_leg_ops(t: Field) -> list[str]:
    """The ``op`` of each leg of a HIER trigger's ``hier`` section (FORMATS §1.1: the
    collective the leg runs, a string), its type checked; [] without one."""
    hier = t.get("hier")
    if hier.null:
        return []
    return [leg["op"].str() for leg in hier["legs"].items()]


def _hier_slices(t: Field) -> list[list[int]] | None:
    """The ``slices`` of a HIER trigger's ``hier`` section (docs/FORMATS.md §1.1: [start, stop)
    of each local index's slice of an all-reduce), its types checked; None without one."""
    hier = t.get("hier")
    if hier.null:
        return None
    return [s.ints(length=2) for s in hier["slices"].items()]


def _resolve_hier(legs: list[tuple], where: dict) -> dict:
    """A HIER trigger's legs (:func:`_hier_legs`), once each leg's groups hold the replica
    group's ranks (:func:`_check_hier_leg_groups`): each leg's groups with their ring orders
    (a plan's positions in the group turned into ranks) and chunk groups, and its
    intermediate buffers; a plan listing a channel twice (one ring order was kept, the
    entries held to the channels left), a plan's chunk value out of range
    (:func:`_check_chunk`), a group that names no plan, a plan position outside a group that
    runs it, a RING or SINGLE_CYCLE_RING leg's ring order that does not list each position
    of the group once, or a plan no group names (FORMATS §1.1: ``plans`` are the groups'
    distinct plans; one no group runs was held to nothing) is a :class:`SimulationError`
    naming the key; so is, first, a channel id of a leg's plan that a plan of an earlier leg
    of the trigger lists (:func:`_check_disjoint_leg_channels`), then a leg's
    ``channel_base`` or ``channel_ids`` other than the range its plans and the legs before
    it give (:func:`_check_leg_channel_ranges`), a RING leg's plan that does not list one
    channel per chunk channel (as a RING trigger), a KANGARING leg's plan whose
    ``kangaring``
    section is not its channels' (:func:`_check_kangaring`, for each group that runs it), a
    SINGLE_CYCLE_RING leg's plan whose ``single_cycle`` section is not its channels' and its
    groups' (:func:`_check_single_cycle`, likewise), and either section on a plan of another
    leg (only a KANGARING leg's plans have ``kangaring``, a SINGLE_CYCLE_RING leg's
    ``single_cycle``: FORMATS §1.1)."""
    out = {}
    _check_disjoint_leg_channels(legs, where)
    _check_leg_channel_ranges(legs, where)
    for i, (name, algorithm, plans, raw_groups, buffers, _span) in enumerate(legs):
        for j, (channels, chunk, *sections) in enumerate(plans):
            if (twice := _first_repeat([ch for ch, _ in channels])) is not None:
                first, c = twice
                raise SimulationError(f"hier.legs[{i}].plans[{j}].channels[{c}].channel "
                                      f"{channels[c][0]} is channels[{first}]'s too (a plan "
                                      "lists each channel its groups run once: FORMATS §1.1)",
                                      **where)
            for key, section in zip(PLAN_SECTIONS, sections):
                if section == FOREIGN_SECTION:
                    raise SimulationError(f"hier.legs[{i}].plans[{j}] has a {key} section on a "
                                          f"{json_kind(algorithm)} leg (only a "
                                          f"{PLAN_SECTIONS[key][0]} leg's plans have one: "
                                          "FORMATS §1.1)", **where)
            _check_chunk(chunk, f"hier.legs[{i}].plans[{j}].chunk", where, layout=True)
            if algorithm in ("RING", "KANGARING") and len(channels) != chunk["channels"]:
                raise SimulationError(f"hier.legs[{i}].plans[{j}].channels should list the "
                                      f"{counted(chunk['channels'], 'channel')} chunk.channels "
                                      f"{chunk['channels']} asks for, not {len(channels)} "
                                      f"(a {algorithm} leg's plan lists one per chunk "
                                      f"channel, as a {algorithm} trigger: FORMATS §1.1)",
                                      **where)
        groups = []
        for g, (group, k) in enumerate(raw_groups):
            if not 0 <= k < len(plans):
                raise SimulationError(f"hier.legs[{i}].groups[{g}].plan {k} is not an index of "
                                      f"hier.legs[{i}].plans, which lists "
                                      f"{counted(len(plans), 'plan')} (a group names its plan by "
                                      "its index there: FORMATS §1.1)", **where)
            if plans[k][2] is not None:  # (a KANGARING leg's: positions in this group)
                _check_kangaring(plans[k][2], plans[k][0], range(len(group)), "position",
                                 f"hier.legs[{i}].plans[{k}].", where,
                                 f"hier.legs[{i}].groups[{g}].group of "
                                 f"{counted(len(group), 'rank')}")
            orders = {}
            for c, (ch, order) in enumerate(plans[k][0]):
                if (p := next((p for p in order if not 0 <= p < len(group)), None)) is not None:
                    raise SimulationError(f"hier.legs[{i}].plans[{k}].channels[{c}].order "
                                          f"{json_text(order)} names position {p}, outside "
                                          f"hier.legs[{i}].groups[{g}].group of "
                                          f"{counted(len(group), 'rank')} (a plan's ring order "
                                          "lists positions of each group that runs it: FORMATS "
                                          "§1.1)", **where)
                if algorithm in WHOLE_GROUP_RINGS:
                    _check_ring_order(
                        order, range(len(group)), "position",
                        f"hier.legs[{i}].plans[{k}].channels[{c}].order",
                        lambda p, group=group: f"(rank {group[p]}) of its group of "
                        f"{len(group)} (a {algorithm} leg's ring order holds each position "
                        "once)", where)
                orders[ch] = [group[p] for p in order]
            if plans[k][3] is not None:  # (a SINGLE_CYCLE_RING leg's: positions in this group)
                _check_single_cycle(plans[k][3], plans[k][0], plans[k][1]["channels"],
                                    len(group), f"hier.legs[{i}].plans[{k}].", where,
                                    f"hier.legs[{i}].groups[{g}].group of "
                                    f"{counted(len(group), 'rank')}")
            groups.append((group, orders, plans[k][1]["pgta"]))
        used = {k for _, k in raw_groups}
        if (unused := next((j for j in range(len(plans)) if j not in used), None)) is not None:
            raise SimulationError(f"hier.legs[{i}].plans[{unused}] is no group's plan (a leg's "
                                  "plans are its groups' distinct plans: FORMATS §1.1)", **where)
        # (where the leg is, and its plans' chunks by group: check_chunk_groups's)
        out[name] = {"algorithm": algorithm, "groups": groups, "buffers": buffers, "at": i,
                     "chunks": [plan[1] for plan in plans],
                     "plan_keys": [_plan_key(plan) for plan in plans],
                     "plan_of": [k for _, k in raw_groups],
                     # a KANGARING leg's units by group (positions; TriggerSpec.kangaring_unit)
                     "kangaring": [plans[k][2] for _, k in raw_groups],
                     # a SINGLE_CYCLE_RING leg's single_cycle section by group
                     "single_cycle": [plans[k][3] for _, k in raw_groups]}
    return out


def _check_disjoint_leg_channels(legs: list[tuple], where: dict) -> None:
    """No channel id of a HIER leg's plans (``legs`` as :func:`_hier_legs` read them) is one
    a plan of an earlier leg of the trigger lists (docs/DESIGN.md "HIER": the legs of one
    trigger use disjoint channel ids, so a rank still in one leg never consumes an increment
    a faster peer meant for its next), else a :class:`SimulationError` naming the later
    plan's item and the earlier one's.  The groups of one leg share its ids.  The entries
    are held to their plans' ids (program.py), not the legs to each other: until 2026-12-05
    an output whose two intra legs both ran channel 0, its artifacts agreeing, simulated as
    a match."""
    earlier: dict[int, str] = {}  # channel id -> the first earlier leg's item listing it
    for i, (_name, _algorithm, plans, _groups, _buffers, _span) in enumerate(legs):
        for j, (channels, *_chunk_sections) in enumerate(plans):
            for c, (ch, _order) in enumerate(channels):
                if ch in earlier:
                    raise SimulationError(f"hier.legs[{i}].plans[{j}].channels[{c}].channel "
                                          f"{ch} is {earlier[ch]}'s too (the legs of one "
                                          "trigger use disjoint channel ids, so a rank still in "
                                          "one leg never consumes an increment a faster peer "
                                          "meant for its next: docs/DESIGN.md \"HIER\")", **where)
        for j, (channels, *_chunk_sections) in enumerate(plans):
            for c, (ch, _order) in enumerate(channels):
                earlier.setdefault(ch, f"hier.legs[{i}].plans[{j}].channels[{c}]")


def _check_leg_channel_ranges(legs: list[tuple], where: dict) -> None:
    """Each HIER leg's ``channel_base`` and ``channel_ids`` (``legs`` as :func:`_hier_legs`
    read them) are the range of channel ids docs/DESIGN.md "HIER" gives it, held to the ids
    its plans run: the first leg's starts at 0 and each later leg's right after the range of
    the leg before it (leg k starts after the channels of the legs before it, so the legs'
    ranges follow their order), each plan of the leg runs the ids from its
    ``channel_base`` on, as many as its channels (until 2026-12-05 evening only an id below
    ``channel_base`` was refused: a plan with a gap, ``channel_base`` and ``channel_base +
    2``, was held by its lowest and highest id), and ``channel_ids`` counts the ids from
    there up to the highest one its plans run (0 when they run none), else a
    :class:`SimulationError` naming the key, checked leg after leg.  Until 2026-12-05
    neither key was read: any values simulated as a match, and legs whose ranges came in
    another order than theirs too (only the plans' ids were held apart:
    :func:`_check_disjoint_leg_channels`, checked before this)."""
    why = "docs/DESIGN.md \"HIER\""
    start, before = 0, None  # where the next leg's range starts, and what says so
    for i, (_name, _algorithm, plans, _groups, _buffers, (base, count)) in enumerate(legs):
        if base != start:
            after = ("the first leg's ids start at 0" if before is None else
                     f"a leg's ids start right after those of the leg before it, "
                     f"hier.legs[{i - 1}].channel_base {before[0]} + channel_ids {before[1]}")
            raise SimulationError(f"hier.legs[{i}].channel_base should be {start}, not {base}: "
                                  f"{after} ({why})", **where)
        top = None  # (the highest id the leg's plans run, the item that lists it)
        for j, (channels, *_chunk_sections) in enumerate(plans):
            ids = sorted(ch for ch, _order in channels)
            # (an id listed twice is named as such once the plans are read: _resolve_hier)
            if len(set(ids)) == len(ids) and ids != list(range(base, base + len(ids))):
                raise SimulationError(f"hier.legs[{i}].plans[{j}].channels should run ids "
                                      f"{json_text(list(range(base, base + len(ids))))}, not "
                                      f"{json_text(ids)} (a "
                                      f"group's plan runs ids from its leg's channel_base on, "
                                      f"as many as its channel count: {why})", **where)
            if ids and (top is None or ids[-1] > top[0]):
                c = next(c for c, (ch, _order) in enumerate(channels) if ch == ids[-1])
                top = (ids[-1], f"hier.legs[{i}].plans[{j}].channels[{c}]")
        want = 0 if top is None else top[0] - base + 1
        if count != want:
            runs = ("its plans run no channel" if top is None else
                    f"its plans run ids from channel_base {base} up to {top[0]} ({top[1]})")
            raise SimulationError(f"hier.legs[{i}].channel_ids should be {want}, not {count}: "
                                  f"{runs} (a leg's range counts the ids from its channel_base "
                                  f"up to the highest its plans run: {why})", **where)
        start, before = base + count, (base, count)


def _block_starts(t: Field) -> list[int]:
    """The first elements of the manifest's mesh ``blocks`` and RDH ``super_blocks``, their
    types checked."""
    out = []
    for sec, key in (("mesh", "blocks"), ("rdh", "super_blocks")):
        f = t.get(sec)
        if not f.null:
            out += [b.ints(length=2)[0] for b in f[key].items()]
    return out


def _view_origins(spec: TriggerSpec, block_starts: list[int]) -> frozenset:
    """Where a linear scratch / gateway view of a mesh or RDH entry may begin, in elements of
    the op space: 0, every natural block start, and the starts of the manifest's mesh
    ``blocks`` and RDH ``super_blocks`` (a channel-buffer slot holds one block, an RH slot a
    run of (super-)blocks starting at one)."""
    g = len(spec.group)
    total = spec.n * g if spec.op == "ALLGATHER" else spec.n
    out = {0} | {j * total // g for j in range(g)}
    if spec.op != "ALLREDUCE":
        out |= {j * (total // g) for j in range(g)}
    return frozenset(out | set(block_starts))


#: A trigger's ordinal is the u32 ``trigger`` field of its TOPSP_KICK word (FORMATS §9).
U32_MAX = (1 << 32) - 1

#: The algorithms whose ``channels[].order`` is a ring of the whole replica group (FORMATS
#: §1.1: RING's ring order, SINGLE_CYCLE_RING's, a CCW channel's reversed); KANGARING's
#: lists only the primaries, mesh and RDH have ``[]`` and HIER none.
WHOLE_GROUP_RINGS = ("RING", "SINGLE_CYCLE_RING")

#: The algorithms whose entry on each rank of the group runs every channel of its trigger (a
#: HIER leg's entry: of the plan its group runs, FORMATS §1.1): RING's and
#: SINGLE_CYCLE_RING's rings hold the whole group, and on each KANGARING channel every rank
#: is its unit's primary or a secondary (docs/TOPOLOGY.md §4: the units cover the group),
#: a secondary with its ``peer_post`` / ``peer_wait`` legs there (FORMATS §3.3).
EVERY_CHANNEL_ENGINES = WHOLE_GROUP_RINGS + ("KANGARING",)

#: The algorithms a trigger may be lowered as, each one the simulator executes (its entries'
#: ``algo_type``, a HIER trigger's legs': docs/SIMULATOR.md §2 SPAD).
ALGORITHMS = ("RING", "KANGARING", "SINGLE_CYCLE_RING", "MESH", "SINGLE_STEP_MESH",
              "INTRA_RDH", "INTER_RDH", "HIER")

#: A trigger's engine sections and the algorithms whose triggers add each (FORMATS §1.1:
#: "mesh triggers add ``mesh``", ...); a trigger of another algorithm has none.
ENGINE_SECTIONS = {"mesh": ("MESH", "SINGLE_STEP_MESH"), "rdh": ("INTRA_RDH", "INTER_RDH"),
                   "kangaring": ("KANGARING",), "single_cycle": ("SINGLE_CYCLE_RING",),
                   "hier": ("HIER",)}

#: The keys of a trigger's ``chunk`` (FORMATS §1.1); a HIER trigger's has ``pgta`` only.
CHUNK_KEYS = ("chunk_size_n", "tail_chunk", "pgta", "channels")

#: The algorithms whose ``chunk`` is a chunk layout (seed 001 §2: chunk groups of chunks, the
#: last group's chunk ``tail_chunk``), as every HIER leg plan's is; mesh and RDH have the
#: whole op as one chunk, ``tail_chunk`` 0, and a HIER trigger ``pgta`` only.
CHUNK_LAYOUTS = ("RING", "SINGLE_CYCLE_RING", "KANGARING")


#: The engine sections a trigger of their algorithms always has (FORMATS §1.1: "mesh triggers
#: add ``mesh``", "RDH triggers ``rdh``"), besides HIER's ``hier`` (:func:`read_triggers`).
REQUIRED_SECTIONS = ("mesh", "rdh")


def _need_engine_section(t: Field, algorithm: str) -> None:
    """A MESH or SINGLE_STEP_MESH trigger has its ``mesh`` section, an INTRA_RDH or INTER_RDH
    trigger its ``rdh`` (FORMATS §1.1; absent or null), else an :class:`OutputError` naming
    the trigger and the section, as a HIER trigger without ``hier`` (until 2026-12-05 either
    could be dropped whole: its ``blocks`` / ``super_blocks`` were read as none, and an
    output whose views start at natural block starts simulated as a match)."""
    for key in REQUIRED_SECTIONS:
        owners = ENGINE_SECTIONS[key]
        if algorithm in owners and t.get(key).null:
            article = "an" if key == "rdh" else "a"
            raise t.bad(f"the trigger has no {key} section, which its algorithm "
                        f"{json_kind(algorithm)} needs ({' and '.join(owners)} triggers have "
                        f"{article} {key} section: FORMATS §1.1)")


def read_triggers(top: dict, *, file: str = "") -> list[dict]:
    """The manifest's ``triggers`` with every value's type checked (a wrong type, or a key
    missing, is an :class:`OutputError` naming it: nrtrewrite/simulate/fields.py), nothing
    else: per trigger the values :func:`check_triggers` takes."""
    out = []
    for t in Field(top, "", file)["triggers"].items():
        chunk = t["chunk"]
        # a HIER trigger's chunk is {"pgta"} only (its legs' chunks are in hier)
        hier = not t.get("hier").null
        algorithm = t["algorithm"].str()
        if not hier and algorithm == "HIER":  # (before its chunk is read)
            raise t.bad("the trigger has no hier section, which its algorithm \"HIER\" needs "
                        "(a HIER trigger's legs are in hier: FORMATS §1.1)")
        _need_engine_section(t, algorithm)
        need = ("pgta",) if hier else CHUNK_KEYS
        out.append(dict(hier=hier,
            sections=[key for key in ENGINE_SECTIONS if not t.get(key).null],
            where=dict(file=file, field=t.path), op=t["op"].str(), dtype=t["dtype"].str(),
            ordinal=t["trigger"].int(0, U32_MAX), alu=t["alu_op"].opt_str(),
            n=t["num_elements"].int(), group=t["replica_group"].ints(0),
            leader=t["leader"].int(0), subgraph=t["subgraph"].str(), engine=t["engine"].str(),
            index=t["index"].int(0), algorithm=algorithm, src=_operand(t["src"]),
            dst=_operand(t["dst"]), pgta=chunk["pgta"].int(),
            channels=[(c["channel"].int(0, MAX_CHANNEL), c["order"].ints(0))
                      for c in t["channels"].items()],
            legs=_hier_legs(t), slices=_hier_slices(t), leg_ops=_hier_leg_ops(t),
            own_legs=[(leg["name"].str(), leg["op"].str(), leg["algorithm"].str(),
                       leg["sub_type"].opt_str()) for leg in t["legs"].items()],
            # (a KANGARING trigger's section and a SINGLE_CYCLE_RING trigger's, required and
            # read with their types whatever else the trigger holds, as a MESH trigger's
            # mesh; one that also has a hier section is refused for that: check_triggers)
            buffers=_trigger_buffers(t, algorithm),
            kangaring=_kangaring(t) if algorithm == "KANGARING" else None,
            single_cycle=_single_cycle(t) if algorithm == "SINGLE_CYCLE_RING" else None,
            chunk={k: chunk[k].int() for k in CHUNK_KEYS if k in need or chunk.has(k)},
            block_starts=_block_starts(t)))
    return out


def check_triggers(typed: list[dict]) -> dict[int, TriggerSpec]:
    """The triggers :func:`read_triggers` read, by ordinal; a value the simulator does not
    take is a :class:`SimulationError` naming the trigger."""
    out: dict[int, TriggerSpec] = {}
    for raw in typed:
        raw = dict(raw)
        where, chunk, starts = raw.pop("where"), raw.pop("chunk"), raw.pop("block_starts")
        channels, hier, sections = raw.pop("channels"), raw.pop("hier"), raw.pop("sections")
        leg_ops = raw.pop("leg_ops")
        raw["orders"] = dict(channels)
        op = raw["op"]
        try:
            raw["dtype"] = DType[raw["dtype"]]
        except KeyError:
            raise SimulationError(f"dtype {json_kind(raw['dtype'])} is not a dtype",
                                  **where) from None
        hier_legs, raw["legs"] = raw["legs"], {}  # (resolved once its groups are checked)
        spec = TriggerSpec(**raw, chunk=chunk, where=where)
        _check_engine(spec.algorithm, sections, where)
        if op not in OPS:
            raise SimulationError(f"op {json_kind(op)} is not simulated (only {', '.join(OPS)})",
                                  **where)
        if hier:
            _check_hier_leg_names(op, [leg[0] for leg in hier_legs], where)
            _check_hier_leg_ops([leg[0] for leg in hier_legs], leg_ops, where)
            _check_hier_leg_algorithms([leg[1] for leg in hier_legs], where)
        if spec.reduce and spec.alu not in ALU_TO_CCE:
            *most, last = ALU_TO_CCE
            raise SimulationError(f"{op} alu_op should be {', '.join(most)} or {last}, not "
                                  f"{json_kind(spec.alu)}", **where)
        if not spec.reduce and spec.alu is not None:
            raise SimulationError(f"{op} alu_op should be null, not {json_kind(spec.alu)} (an "
                                  "all-gather reduces nothing: FORMATS §1.1)", **where)
        if not spec.group:
            raise SimulationError("replica_group is empty", **where)
        if (twice := _first_repeat(spec.group)) is not None:
            raise SimulationError(f"replica_group lists rank {spec.group[twice[1]]} twice",
                                  **where)
        if spec.n <= 0:
            raise SimulationError(f"num_elements should be 1 or more, not {spec.n}", **where)
        _check_chunk(chunk, "chunk", where, layout=spec.algorithm in CHUNK_LAYOUTS)
        _check_channel_ids(spec, channels, where)
        if spec.algorithm in WHOLE_GROUP_RINGS:
            _check_ring_orders(spec, channels, where)
        _check_ringless_channels(spec, channels, where)
        if spec.kangaring is not None:
            _check_kangaring(spec.kangaring, channels, spec.group, "rank", "", where,
                             "the replica_group")
        if spec.single_cycle is not None:
            _check_single_cycle(spec.single_cycle, channels, spec.chunk["channels"],
                                len(spec.group), "", where,
                                f"its replica_group of {counted(len(spec.group), 'rank')}")
        _check_own_legs(spec, hier_legs, leg_ops, where)
        _check_hier_leg_groups(spec, hier_legs, where)
        spec.legs = _resolve_hier(hier_legs, dict(file=where["file"] or None,
                                                  field=where["field"]))
        spec.view_origins = _view_origins(spec, starts)
        if spec.op == "REDUCE_SCATTER" and spec.n % len(spec.group):
            raise SimulationError("REDUCE_SCATTER num_elements is not a multiple of the group size",
                                  **where)
        if spec.leader != min(spec.group):
            raise SimulationError(f"leader {spec.leader} is not the smallest rank of the group",
                                  **where)
        if spec.ordinal in out:
            raise SimulationError(f"trigger {spec.ordinal} listed twice", **where)
        out[spec.ordinal] = spec
    return out


#: What a trigger's own ``legs`` say (FORMATS §1.1), for the messages of :func:`_check_own_legs`.
OWN_LEGS_RULE = ("a flat trigger's legs are one leg, flat, running its op on its algorithm; a "
                 "HIER trigger's repeat its hier.legs, each's name, op and algorithm: FORMATS "
                 "§1.1")


def _check_own_legs(spec: TriggerSpec, hier_legs: list[tuple], leg_ops: list[str],
                    where: dict) -> None:
    """The trigger's own ``legs`` (FORMATS §1.1: ``name``, ``op``, ``algorithm``,
    ``sub_type``; the selection's legs, docs/SELECTION.md §9) say what the trigger says: a
    flat trigger's one leg ``flat`` of its op and algorithm, a HIER trigger's its
    ``hier.legs`` one for one, by name, op and algorithm (checked after those), each with
    ``sub_type`` null (no HIER leg runs a mesh-family engine: docs/SELECTION.md §6), else a
    :class:`SimulationError` naming the key.  A flat leg's ``sub_type`` needs the ranks'
    nodes: :func:`check_own_legs`.  (Until 2026-12-05 ``legs`` was not read: any value
    simulated as a match.)"""
    if hier_legs:
        want = [(name, op, algorithm, None)
                for (name, algorithm, *_rest), op in zip(hier_legs, leg_ops)]
        whose = [f"hier.legs[{i}]" for i in range(len(want))]
    else:
        want = [("flat", spec.op, spec.algorithm, _ANY)]
        whose = ["the trigger"]
    got = spec.own_legs
    if len(got) != len(want):
        raise SimulationError(f"legs should list {counted(len(want), 'leg')}, not {len(got)} "
                              f"({OWN_LEGS_RULE})", **where)
    for i, (have, should, of) in enumerate(zip(got, want, whose)):
        for k, key in enumerate(("name", "op", "algorithm", "sub_type")):
            if should[k] is _ANY or have[k] == should[k]:
                continue
            src = ("" if key == "name" and not hier_legs or key == "sub_type" else
                   f", {of}'s")
            note = ("" if key != "sub_type" else
                    " (no HIER leg runs a mesh-family engine, the only ones with a sub_type: "
                    "docs/SELECTION.md §6, §9)")
            raise SimulationError(f"legs[{i}].{key} should be {json_kind(should[k])}{src}, not "
                                  f"{json_kind(have[k])}{note} ({OWN_LEGS_RULE})", **where)


#: Any value (a flat leg's sub_type, held with the ranks' nodes: :func:`check_own_legs`).
_ANY = object()
#: The engines whose leg has a sub_type (``select._MESH_FAMILY`` as ``lower`` writes them).
MESH_SUB_TYPE_ENGINES = ("MESH", "SINGLE_STEP_MESH", "INTRA_RDH")


def check_own_legs(triggers: dict[int, "TriggerSpec"], layout: Layout) -> None:
    """A flat trigger's leg's ``sub_type`` (FORMATS §1.1 ``legs``) is what docs/SELECTION.md
    §9 gives its engine: null but for a mesh-family engine (MESH, SINGLE_STEP_MESH,
    INTRA_RDH), whose sub_type is FULL_MESH when its replica_group spans nodes, else the
    platform's (``topology.mesh_sub_type``, when recorded and not null), else a
    :class:`SimulationError` naming the key (until 2026-12-05 not read).  On a platform
    without mesh (``topology.mesh_sub_type`` recorded null) ``lower`` writes no mesh-family
    leg (no mesh-family engine is legal there, docs/SELECTION.md §3): such a leg is refused
    whatever its ``sub_type`` and nodes (until 2026-12-06 its ``sub_type`` was not held: an
    intra-node one's entries were refused per rank, ``a mesh-family entry ... on a platform
    without mesh``, and one across nodes simulated as a match)."""
    for spec in triggers.values():
        if spec.slices is not None or len(spec.own_legs) != 1:  # (HIER: _check_own_legs)
            continue
        got = spec.own_legs[0][3]
        if spec.algorithm not in MESH_SUB_TYPE_ENGINES:
            want, why = None, (f"only a mesh-family leg ({', '.join(MESH_SUB_TYPE_ENGINES)}) "
                               "has a sub_type")
        elif layout.mesh_sub_type_recorded and layout.mesh_sub_type is None:
            raise SimulationError(
                f"legs[0].sub_type {json_kind(got)}: a mesh-family leg ({spec.algorithm}) on "
                "a platform without mesh (topology.mesh_sub_type null), which lower never "
                "writes: no mesh-family engine is legal there, inside a node or across nodes "
                "(docs/SELECTION.md §3, §9; docs/TOPOLOGY.md §2 mesh)", **spec.where)
        elif len({layout.places[r].node for r in spec.group if r in layout.places}) > 1:
            want, why = "FULL_MESH", "a mesh-family leg over a replica_group that spans nodes"
        elif layout.mesh_sub_type_recorded:
            want = layout.mesh_sub_type_name
            why = "an intra-node mesh-family leg's is the platform's, topology.mesh_sub_type"
        else:
            continue
        if got != want:
            raise SimulationError(f"legs[0].sub_type should be {json_kind(want)}, not "
                                  f"{json_kind(got)}: {why} (docs/SELECTION.md §9; FORMATS "
                                  "§1.1)", **spec.where)


def check_options(triggers: dict[int, "TriggerSpec"], layout: Layout) -> None:
    """The triggers' engines are what ``options.algo``, the override ``lower`` applied,
    leaves them (docs/SELECTION.md §8, decided without re-running the selection): a
    collective's clause (its own, else the untargeted one) that forces an engine is the
    trigger's ``algorithm`` (a forced engine runs, or ``lower`` refuses the model), one that
    restricts or excludes leaves the algorithm among the engines it allows (the cascade and
    the lowering fallback stay inside them); a HIER leg's clause that forces an engine is
    that leg's ``algorithm``, and otherwise the leg's engine is one its clause allows and no
    untargeted or per-collective exclusion names (allow-lists do not reach the legs; a leg
    clause beats an exclusion).  An ``options.algo`` the current ``lower`` does not take is
    not held: ``lower`` took some such before 2026-12-01 (``ring,``, ``ring;mesh``, a blank)
    and recorded them as given.  A :class:`SimulationError` naming the key otherwise
    (until 2026-12-05 ``options.algo`` was not read: an output whose triggers ran other
    engines simulated as a match).  Which
    engine the policy picks inside what the override allows depends on the sizes and the
    platform's windows, so it is not held."""
    text = layout.algo_option
    if text is None:
        return
    try:
        override = parse_algo_override(text)
    except ValidationError:
        # (a form lower took only before 2026-12-01, cf954e0 and 0f528dc, recorded as given:
        # `ring,`, `ring;`, `ring;mesh`, a blank; such an output simulated as a match and
        # still does: its override is not held)
        return
    for spec in triggers.values():
        op_clause = override.for_op(EncOpType[spec.op])
        op_scope = (f"on {spec.op}" if op_clause is not None and op_clause.target is not None
                    else "on every collective")
        if op_clause is not None:
            _held_to_clause(override, op_clause, spec.algorithm, "algorithm", op_scope,
                            spec.where)
        for name, leg in spec.legs.items():
            clause = override.for_leg(name)
            key = f"hier.legs[{leg['at']}].algorithm"
            if clause is not None:
                _held_to_clause(override, clause, leg["algorithm"], key, f"on the {name} leg",
                                spec.where)
                if clause.forced is not None:
                    continue  # (a leg clause that forces an engine beats an exclusion)
            if op_clause is not None and op_clause.exclude:
                _held_to_clause(override, op_clause, leg["algorithm"], key,
                                f"{op_scope} and its HIER legs", spec.where)


def _held_to_clause(override: AlgoOverride, clause, algorithm: str, key: str, scope: str,
                    where: dict) -> None:
    """``algorithm`` (the value of ``key``) is one ``clause`` of ``override`` allows, the one
    it forces when it forces one (:func:`check_options`)."""
    try:
        alg = EncAlgType[algorithm]
    except KeyError:
        return  # (not an engine: refused as such by the engine checks)
    if clause.allows(alg) and (clause.forced is None or clause.forced == alg):
        return
    said = f"options.algo {json_kind(override.text)}"
    if clause.text != override.text:
        said += f" (clause {json_kind(clause.text)})"
    if clause.forced is not None:
        why = (f"should be {json_kind(clause.forced.name)}, the engine {said} forces {scope}, "
               f"not {json_kind(algorithm)} (a forced engine runs, or lower refuses the model: "
               "docs/SELECTION.md §8)")
    elif clause.exclude:
        why = (f"{json_kind(algorithm)} is an engine {said} excludes {scope} (the cascade and "
               "the lowering fallback "
               "stay inside the engines it leaves: docs/SELECTION.md §8)")
    else:
        names = ", ".join(a.name for a in sorted(clause.algs, key=int))
        why = (f"should be one of {names}, the engines {said} allows {scope}, not "
               f"{json_kind(algorithm)} (the cascade and the lowering fallback stay inside "
               "them: docs/SELECTION.md §8)")
    raise SimulationError(f"{key} {why}", **where)


def _check_engine(algorithm: str, sections: list[str], where: dict) -> None:
    """The trigger's ``algorithm`` is one the simulator executes (:data:`ALGORITHMS`), and
    it has no engine section of another algorithm (:data:`ENGINE_SECTIONS`, FORMATS §1.1),
    else a :class:`SimulationError` naming the value and the section (an unknown algorithm
    was blamed on its entries' ``algo_type``; a mesh section's ``blocks`` on an RDH trigger
    widened the views its legs may start at, and a foreign section simulated as a match)."""
    if algorithm not in ALGORITHMS:
        raise SimulationError(f"algorithm {json_kind(algorithm)} is not simulated (only "
                              f"{', '.join(ALGORITHMS)})", **where)
    for key in sections:
        owners = ENGINE_SECTIONS[key]
        if algorithm in owners:
            continue
        if key == "hier":  # (its chunk holds pgta alone: read_triggers)
            why = "only a HIER trigger's legs are in hier"
        else:
            why = f"only {' and '.join(owners)} triggers have one"
        article = "an" if key == "rdh" else "a"
        raise SimulationError(f"the trigger has {article} {key} section, which its algorithm "
                              f"{json_kind(algorithm)} has no use for ({why}: FORMATS §1.1)",
                              **where)


def _check_hier_leg_names(op: str, names: list[str], where: dict) -> None:
    """A HIER trigger's ``hier.legs`` are the legs docs/DESIGN.md "HIER" gives its op
    (``select.HIER_LEGS``), by name, in that order, else a :class:`SimulationError` naming the
    first leg that is not (the rank manifests' entries name their legs; one the trigger does
    not list was blamed on the entry's ``algo_type``)."""
    want = HIER_LEGS[EncOpType[op]]
    why = (f"a HIER {op} runs the legs {', '.join(want)}, in that order (docs/DESIGN.md "
           "\"HIER\")")
    for i, (name, leg) in enumerate(zip(names, want)):
        if name != leg:
            raise SimulationError(f"hier.legs[{i}].name should be {leg}, not "
                                  f"{json_kind(name)}: {why}",
                                  **where)
    if len(names) != len(want):
        raise SimulationError(f"hier.legs should list {counted(len(want), 'leg')}, not "
                              f"{len(names)}: {why}", **where)


def _check_hier_leg_ops(names: list[str], ops: list[str], where: dict) -> None:
    """Each HIER leg's ``op`` is the collective its name says it runs (docs/DESIGN.md "HIER",
    ``select.LEG_OPS``: ``intra_redsct`` and ``inter_redsct`` a reduce-scatter, ``inter_allr``
    an all-reduce, ``inter_allg`` and ``intra_allg`` an all-gather; the names are held to
    the trigger's op before), else a :class:`SimulationError` naming the key (until
    2026-12-05 not read: any value, of any type, simulated as a match).  The leg's
    ``reason`` (the selection's text, as ``explain`` shows it) is informative, never read."""
    for i, (name, op) in enumerate(zip(names, ops)):
        want = LEG_OPS[name][1].name
        if op != want:
            raise SimulationError(f"hier.legs[{i}].op should be {want}, not {json_kind(op)}: "
                                  f"the {name} leg runs {_LEG_RUNS[want]} (docs/DESIGN.md "
                                  "\"HIER\")",
                                  **where)


#: What a HIER leg of each op does, for :func:`_check_hier_leg_ops`'s message.
_LEG_RUNS = {"ALLREDUCE": "an all-reduce", "ALLGATHER": "an all-gather",
             "REDUCE_SCATTER": "a reduce-scatter"}


def _check_hier_leg_algorithms(algorithms: list[str], where: dict) -> None:
    """Each HIER leg's ``algorithm`` (its engine, FORMATS §1.1) is one the simulator executes
    and not HIER (a leg is flat), else a :class:`SimulationError` naming the key and the value
    (it was blamed on the leg's entries: ``algo_type RING but trigger 0 was lowered as HIER
    with leg intra_redsct KANGAROO``)."""
    engines = [a for a in ALGORITHMS if a != "HIER"]
    for i, algorithm in enumerate(algorithms):
        if algorithm not in engines:
            raise SimulationError(f"hier.legs[{i}].algorithm {json_kind(algorithm)} is not "
                                  f"simulated as a leg (only {', '.join(engines)})", **where)


def _check_hier_leg_groups(spec: TriggerSpec, legs: list[tuple], where: dict) -> None:
    """Each HIER leg's ``groups`` (``legs`` as :func:`_hier_legs` read them) are not empty and
    hold every rank of the trigger's ``replica_group`` once (docs/DESIGN.md "HIER": the intra
    legs run on each node's ranks, the inter legs on the ranks of each local index), else a
    :class:`SimulationError` naming the key: an empty group, or, of the leg's groups, a
    stranger, a rank twice, or the first rank missing (a group of strangers simulated as a
    match, its ranks' legs read from no group of the leg).  Checked before the groups' plans
    are read (:func:`_resolve_hier`), so a group that lost a rank is named for it, not for
    the plan it shares with its larger neighbours; then they are DESIGN's groups exactly, by
    the topology table's nodes (:func:`check_hier_groups`)."""
    for i, (_name, _algorithm, _plans, raw_groups, _buffers, _span) in enumerate(legs):
        for g, (group, _k) in enumerate(raw_groups):
            if not group:  # (a group's layout is cut by its size: check_chunk_groups)
                raise SimulationError(f"hier.legs[{i}].groups[{g}].group is empty (a leg's "
                                      "group lists its ranks, 1 or more)", **where)
        ranks = [r for group, _k in raw_groups for r in group]
        _check_ring_order(ranks, spec.group, "rank", f"hier.legs[{i}].groups",
                          lambda _r: "of the replica_group (a HIER leg's groups hold each "
                          "rank once)", where)


def check_hier_groups(triggers: dict[int, TriggerSpec], layout: Layout) -> None:
    """Each HIER leg's ``groups`` are docs/DESIGN.md "HIER"'s, in order (FORMATS §1.1: a
    group's ``group`` lists its ranks in position order), else a :class:`SimulationError`
    naming ``hier.legs[i].groups[g].group`` and both values: an intra leg's group g the
    ranks of the replica group's g-th node (position j its j-th local rank, in rank order),
    an inter leg's group j the j-th local rank of each node (position i node i), the groups
    ``lower`` plans (``select.hier_split`` of ``select.ranks_by_node``, the node of each rank
    the manifest's ``topology.ranks``: :class:`Layout`).  Checked once each leg's groups hold
    every rank once (:func:`_check_hier_leg_groups`): a rank moved to another node's group,
    inter ranks regrouped, or a group's ranks in another order were blamed on a rank's legs
    (a ring successor, a chunk's elements) or simulated as a match (a reversed pair, the
    groups listed in another order)."""
    for spec in triggers.values():  # (in the manifest's order)
        if spec.slices is None:  # (not a HIER trigger)
            continue
        _refuse_stray_rank(spec.group, layout, spec.where)
        by_node = ranks_by_node(spec.group, lambda r: layout.places[r].node)
        intra, inter = hier_split(tuple(ranks for _, ranks in by_node))
        for name, leg in spec.legs.items():
            i, groups = leg["at"], [group for group, _o, _p in leg["groups"]]
            intra_leg = LEG_OPS[name][0] == INTRA
            want = intra if intra_leg else inter
            for g, (group, w) in enumerate(zip(groups, want)):
                if tuple(group) != w:
                    raise SimulationError(f"hier.legs[{i}].groups[{g}].group should be "
                                          f"{json_text(list(w))}, not {json_text(group)}: "
                                          f"{_hier_group_rule(intra_leg, g, by_node)}",
                                          **spec.where)
            if len(groups) != len(want):
                count = ("one per node of the replica_group" if intra_leg else
                         "one per local index (the fewest ranks of the replica_group on a node)")
                raise SimulationError(f"hier.legs[{i}].groups should list "
                                      f"{counted(len(want), 'group')}, not {len(groups)}: "
                                      f"{name} has {count} (docs/DESIGN.md \"HIER\")",
                                      **spec.where)


#: docs/TOPOLOGY.md §4: a KANGARING device's s-engines (KANGARING_NUM_SENG_PER_DEV), each
#: holding 1 or 2 of its ranks; a unit the ranks of s-engines k and k ^ 2, k = 0, 1
KANGARING_SENGINES = 4
#: s-engines a die of a KANGARING device (2 dies x 2: docs/TOPOLOGY.md §2 kangaring)
KANGARING_SENGINES_PER_DIE = 2
KANGARING_ORDER = ("(docs/TOPOLOGY.md §4: a unit is the ranks of s-engines k and k ^ 2 of one "
                   "device, S_k then S_k^2 with one rank an engine, else S_k t0, S_k^2 t0, "
                   "S_k^2 t1, S_k t1, t0 the lower TPB; on the collective's channel at place c of "
                   "its ids in ascending order, member c % size is the primary, the others "
                   "follow in that order)")


def _refuse_stray_rank(group, layout: Layout, where: dict) -> None:
    """A :class:`SimulationError` (``field topology``) naming the first rank of ``group``
    the manifest's topology table does not hold (the checks of a group's places below
    read each rank's row)."""
    if (stray := next((r for r in group if r not in layout.places), None)) is not None:
        raise SimulationError(f"rank {stray} is not in the topology table",
                              file=where.get("file") or None, field="topology")


def check_device_links(triggers: dict[int, TriggerSpec], layout: Layout) -> None:
    """Every device of a node that a trigger's ``replica_group`` touches is joined to the
    others by a chain of the links the manifest records (``topology.links``, a platform not
    exactly a preset: FORMATS §1.1), else a :class:`SimulationError` naming the trigger: a
    hop between them has no route, and ``lower`` refuses such a group (docs/TOPOLOGY.md §1;
    until 2026-12-06 it lowered the hop as a routed C2C hop, over links the devices lack, on
    a file such as ``{"platform": "trn2", "device": {"c2c_ports": 1}}``)."""
    for spec in triggers.values():
        _refuse_stray_rank(spec.group, layout, spec.where)
        apart = layout.unlinked_devices(spec.group)
        if apart is not None:
            node, a, b = apart
            raise SimulationError(
                f"replica_group needs a hop between devices {a} and {b} of node {node}, which "
                "no chain of the links topology.links records joins: the hop has no route "
                "(lower refuses such a group: docs/TOPOLOGY.md §1)", **spec.where)


def check_kangaring_units(triggers: dict[int, TriggerSpec], layout: Layout) -> None:
    """Each unit of a KANGARING trigger's ``kangaring`` section, and of a KANGARING HIER leg's
    plans for each group that runs them, is the one docs/TOPOLOGY.md §4 makes of the ranks'
    places (``topology.ranks``: a device is a ``node`` and ``routing_id``, the simulator's
    device everywhere; ``logical_core``, ``tpb``, ``sengine``), else a
    :class:`SimulationError`: every device the group touches holds 4 or 8 of its ranks,
    logical cores 0 .. 3 or 0 .. 7 (KangaRing needs whole devices, 4 s-engines of 1 or 2
    ranks), each rank's ``sengine`` its ``tpb`` // (TPBs per s-engine, its ranks per engine x
    ``lnc_size``) (naming ``topology.ranks[i].sengine``), and each unit the ranks of
    s-engines k and k ^ 2 of one device in the member order above, the primary member c %
    size on the collective's channel at place c of its ids in ascending order (whatever
    the list's order; naming ``kangaring[k].units[u]``).  Until
    2026-12-05 ``sengine`` was not read: a unit of ranks of another device or engine pair,
    or a primary other than TOPOLOGY's, simulated as a match when the legs agreed.  Every
    rank's place is held to its platform's shape before (layout.Layout._check_places), so
    the shapes taken here from ``tpb`` and ``sengine`` are the platform's (a preset's), or
    one docs/TOPOLOGY.md §1 allows (a topology file's); each rank's ``die`` is then its
    ``sengine`` // 2 (KangaRing's 2 dies of 2 s-engines, naming ``topology.ranks[i].die``:
    a topology file's table relabelled to another shape, every die 0, is refused here; until
    2026-12-06 it simulated as a match)."""
    for spec in triggers.values():
        if spec.kangaring is not None:
            _check_units_of(spec.kangaring, spec.group, "", "the replica_group", layout,
                            spec.where, "rank")
        for name, leg in spec.legs.items():
            if leg["algorithm"] != "KANGARING":
                continue
            i = leg["at"]
            for g, ((group, _orders, _pgta), section) in enumerate(zip(leg["groups"],
                                                                       leg["kangaring"])):
                k = leg["plan_of"][g]
                _check_units_of(section, group, f"hier.legs[{i}].plans[{k}].",
                                f"hier.legs[{i}].groups[{g}].group", layout, spec.where,
                                "position")


def _check_units_of(section: list[tuple], group, at: str, of_what: str, layout: Layout,
                    where: dict, noun: str) -> None:
    """:func:`check_kangaring_units` of one section (``at`` its key's prefix) over ``group``
    (its members: ranks, or positions of ``group`` when ``noun`` is "position"); an item's
    place c is its channel id's among the section's ids in ascending order (a flat
    trigger's ids from 0, a HIER leg's from its ``channel_base``), whatever the order the
    items are listed in."""
    _refuse_stray_rank(group, layout, where)
    places = layout.places
    devices: dict[tuple[int, int], list[int]] = {}
    for r in group:
        devices.setdefault((places[r].node, places[r].device), []).append(r)
    canon: dict[int, tuple[int, ...]] = {}  # rank -> its unit in TOPOLOGY's member order
    for (node, dev), ranks in devices.items():
        cores = sorted(places[r].core for r in ranks)
        if len(cores) not in (KANGARING_SENGINES, 2 * KANGARING_SENGINES) or \
                cores != list(range(len(cores))):
            raise SimulationError(
                f"{at}kangaring: the logical cores {of_what} holds of the device of node "
                f"{node}, routing_id {dev}, should be 0 to {KANGARING_SENGINES - 1} or 0 to "
                f"{2 * KANGARING_SENGINES - 1}, not {json_text(cores)} (KangaRing needs "
                f"every rank of each device it touches: {KANGARING_SENGINES} s-engines of 1 "
                "or 2 ranks each, "
                "docs/TOPOLOGY.md §4)", **where)
        per = len(cores) // KANGARING_SENGINES  # ranks per s-engine
        tpbs = per * layout.lnc_size  # TPBs per s-engine
        by_core = {places[r].core: r for r in ranks}
        for lc in range(len(cores)):
            p = places[by_core[lc]]
            if p.sengine != p.tpb // tpbs:
                raise SimulationError(
                    f"rank {p.rank}: sengine should be {p.tpb // tpbs}, tpb {p.tpb} // {tpbs}, not "
                    f"{p.sengine} (the s-engine of its first TPB, tpb // tpbs_per_sengine: its "
                    f"device's {KANGARING_SENGINES} s-engines hold {counted(per, 'rank')} each "
                    f"in the units of {where.get('field')}.{at}kangaring: docs/TOPOLOGY.md §1,"
                    " §4)",
                    file=where.get("file") or None, field=f"{p.path}.sengine")
            # (KangaRing runs on 2 dies of 2 s-engines only: a topology file's table
            # relabelled to another shape, every die 0, describes a device lower lowers no
            # KANGARING on; until 2026-12-06 the die was held to the fitted shape alone)
            if p.die != p.sengine // KANGARING_SENGINES_PER_DIE:
                raise SimulationError(
                    f"rank {p.rank}: die should be {p.sengine // KANGARING_SENGINES_PER_DIE}, "
                    f"sengine {p.sengine} // {KANGARING_SENGINES_PER_DIE}, not {p.die} "
                    f"(KangaRing needs 2 "
                    f"dies of {KANGARING_SENGINES_PER_DIE} s-engines, each unit's engines k and "
                    f"k ^ 2 on the two dies; lower writes no KANGARING for another device shape "
                    f"in the units of {where.get('field')}.{at}kangaring: docs/TOPOLOGY.md §1, "
                    "§2 kangaring, §4)",
                    file=where.get("file") or None, field=f"{p.path}.die")
        on = [[by_core[lc] for lc in cores if places[by_core[lc]].sengine == e]
              for e in range(KANGARING_SENGINES)]  # each engine's ranks, the lower TPB first
        for kk in (0, 1):
            a, b = on[kk], on[kk ^ 2]
            unit = (a[0], b[0]) if per == 1 else (a[0], b[0], b[1], a[1])
            for r in unit:
                canon[r] = unit
    pos = {r: p for p, r in enumerate(group)}

    def shown(ranks) -> str:
        if noun == "rank":
            return json_text(list(ranks))
        return json_text([pos[r] for r in ranks])
    ids = sorted(item[0] for item in section)
    for k, (ch, _path, units, _dup) in enumerate(section):
        c = ids.index(ch)  # (the channel's place among the collective's: TOPOLOGY §4)
        for u, unit in enumerate(units):
            ranks = [group[m] for m in unit] if noun == "position" else list(unit)
            whole = canon[ranks[0]]
            p = c % len(whole)
            want = [whole[p], *(m for i, m in enumerate(whole) if i != p)]
            if ranks != want:
                also = "" if noun == "rank" else f" (ranks {json_text(ranks)})"
                first = ranks[0] if noun == "rank" else pos[ranks[0]]
                raise SimulationError(f"{at}kangaring[{k}].units[{u}] should be {shown(want)}, the "
                                      f"unit of {noun} {first} with member {c} % {len(whole)} "
                                      f"its primary on channel {ch}"
                                      f"{'' if c == ch else f' (place {c})'}, not "
                                      f"{shown(ranks)}{also} {KANGARING_ORDER}", **where)


#: the regions a trigger's or HIER leg's ``buffers`` live in (docs/FORMATS.md §1.1)
BUFFER_REGIONS = ("scratch", "gw")


def check_buffers(triggers: dict[int, TriggerSpec], layout: Layout) -> None:
    """Each buffer a trigger (``buffers``: a single-cycle trigger's second views) or a HIER
    leg (``hier.legs[i].buffers``) lists lies inside its region of the output's memory map
    (docs/FORMATS.md §1.1: ``region`` scratch or gw, ``offset`` in bytes inside it, element
    e at offset + e x dtype size), its first element whole, else a :class:`SimulationError`
    naming the key and the region's size (or that the memory map has no such region); a
    trigger lists ``buffers`` only if it is SINGLE_CYCLE_RING (FORMATS §1.1: a trigger
    without such views has no ``buffers`` key).  Each is an anchor a leg's streams may start
    at (:meth:`TriggerSpec.leg_buffers`); until 2026-12-05 none was checked, and ``lower``
    listed a HIER leg's ``gw2`` and ``recv2`` past their regions on every leg that is not
    single-cycle."""
    why = "(a buffer lies inside its region: FORMATS §1.1)"
    for spec in triggers.values():  # (in the manifest's order)
        if spec.buffers == [] and spec.algorithm != "SINGLE_CYCLE_RING":
            raise SimulationError(f"buffers is [] on a {spec.algorithm} trigger (a trigger "
                                  "without second views has no buffers key, not an empty "
                                  "list: FORMATS §1.1)", **spec.where)
        if spec.buffers and spec.algorithm != "SINGLE_CYCLE_RING":
            raise SimulationError(f"buffers lists {counted(len(spec.buffers), 'buffer')} on a "
                                  f"{spec.algorithm} trigger (only a SINGLE_CYCLE_RING "
                                  "trigger has buffers, its second views: FORMATS §1.1)",
                                  **spec.where)
        for leg in spec.legs.values():
            _refuse_older_hier_buffers(spec, leg)
        lists = [("buffers", spec.buffers or [])] + [(f"hier.legs[{leg['at']}].buffers",
                                                leg["buffers"]) for leg in spec.legs.values()]
        dsize = io_size(spec.dtype)
        for key, buffers in lists:
            for b, buf in enumerate(buffers):
                kind, off = str(buf["region"]), int(buf["offset"])
                if kind not in BUFFER_REGIONS:
                    raise SimulationError(f"{key}[{b}].region should be scratch or gw, not "
                                          f"{json_text(kind)} (FORMATS §1.1)", **spec.where)
                reg = layout.named(kind)
                if reg is None:
                    raise SimulationError(f"{key}[{b}].region {json_text(kind)}: the memory "
                                          f"map has no {kind} region {why}", **spec.where)
                size = reg.size
                if not 0 <= off < size:
                    region = (f"the {kind} region's {counted(size, 'byte')}" if size else
                              f"the memory map's {kind} region, which is empty")
                    raise SimulationError(f"{key}[{b}].offset {off} is outside {region} {why}",
                                          **spec.where)
                if off + dsize > size:
                    raise SimulationError(
                        f"{key}[{b}].offset {off} leaves {counted(size - off, 'byte')} of the "
                        f"{kind} region's {counted(size, 'byte')}, less than a "
                        f"{spec.dtype.name} element ({counted(dsize, 'byte')}) {why}",
                        **spec.where)
        if spec.algorithm == "SINGLE_CYCLE_RING":
            _check_single_cycle_roles(spec, layout)
        for name, leg in spec.legs.items():
            _check_hier_leg_roles(spec, name, leg)


#: FORMATS §1.1: a flat SINGLE_CYCLE_RING trigger's ``buffers`` are its second views, each in
#: its region: the second receive view ``recv2`` in scratch (the CCW partials), the second
#: staging view ``gw2`` in gw (the CCW channel's network sends, §8.3).
SINGLE_CYCLE_REGIONS = {"recv2": "scratch", "gw2": "gw"}


def _check_single_cycle_roles(spec: TriggerSpec, layout: Layout) -> None:
    """A flat SINGLE_CYCLE_RING trigger's ``buffers`` list ``recv2`` once, in scratch, and
    ``gw2`` in gw once when its group spans nodes (its CCW sends cross the network and
    stage there: FORMATS §8.3), none when it is on one node, and no other role, else a
    :class:`SimulationError` naming the key (until 2026-12-05 the roles were not read: a
    role "zz", a second recv2, or recv2 and gw2 swapped, simulated as a match), each at one
    space of its region, the trigger's ``num_elements`` in bytes of its dtype (docs/DESIGN.md
    "Single-cycle ring": RECV and the staging at 0; until 2026-12-05 held to their regions
    only: recv2 moved to scratch 0 simulated as a match, gw2 moved to gw 0 was blamed on
    sb2sb.bin)."""
    why = ("a SINGLE_CYCLE_RING trigger lists recv2 in scratch, and gw2 in gw when its group "
           "spans nodes: FORMATS §1.1, §8.3")
    for b, buf in enumerate(spec.buffers):
        role, region = buf["role"], buf["region"]
        if role not in SINGLE_CYCLE_REGIONS:
            raise SimulationError(f"buffers[{b}].role should be recv2 or gw2, not "
                                  f"{json_text(role)} ({why})", **spec.where)
        if region != SINGLE_CYCLE_REGIONS[role]:
            raise SimulationError(f"buffers[{b}] (role {role}) should be in "
                                  f"{SINGLE_CYCLE_REGIONS[role]}, not {region} ({why})",
                                  **spec.where)
        if buf["offset"] != (space := spec.n * spec.dsize):
            raise SimulationError(f"buffers[{b}].offset (role {role}) should be {space}, one "
                                  f"space of {region}, not {buf['offset']} (docs/DESIGN.md "
                                  "\"Single-cycle ring\": RECV and the staging at 0, the "
                                  "second views at one space, the trigger's "
                                  f"{_space_text(spec)})", **spec.where)
    spans = len({layout.places[r].node for r in spec.group if r in layout.places}) > 1
    nodes = ": its replica_group spans nodes" if spans else ": its replica_group is on one node"
    # a one-rank group receives nothing: no recv2 (buffers []), or, lowered before 2026-12-06,
    # recv2 at one space of the two spaces of scratch it then reserved (held above)
    one = len(spec.group) == 1
    for role, want, said in (("recv2", 0 if one else 1, ": its replica_group is one rank"
                              if one else ""), ("gw2", int(spans), nodes)):
        got = sum(buf["role"] == role for buf in spec.buffers)
        if got != want and not (one and role == "recv2" and got == 1):
            # (a one-rank group's: both counts it accepts, until 2026-12-06 "0" alone)
            listed = ("0 or 1 recv2 buffers (1 as lowered before 2026-12-06)"
                      if one and role == "recv2" else counted(want, role + " buffer"))
            raise SimulationError(f"buffers should list {listed}, not {got}{said} ({why})",
                                  **spec.where)


#: FORMATS §1.1: every HIER leg lists ``gw`` at 0 of the gw region (the gateway view every
#: entry names); only a single-cycle leg lists ``recv2`` and ``gw2``.
HIER_GW = {"offset": 0, "region": "gw"}
SINGLE_CYCLE_ROLES = ("recv2", "gw2")
#: FORMATS §1.1: the roles of a HIER leg's buffers, the leg's views they back.
HIER_ROLES = ("in", "out", "recv", "recv2", "gw", "gw2")
#: docs/DESIGN.md "HIER": where each leg's views other than ``gw`` live when they are in
#: scratch or gw, as (region, offset in spaces of the trigger's element space): the first
#: leg's RECV at scratch 0 and its output MID at one space, the inter leg's input MID at one
#: space, its RECV at two, a single-cycle leg's second RECV at three and its second staging
#: view at gw one space; the other views of a leg are the trigger's operands (an all-gather's
#: legs and the all-reduce's intra_allg run in OUT).
HIER_ROLE_PLACES = {
    "intra_redsct": {"recv": ("scratch", 0), "out": ("scratch", 1)},
    **{inter: {"in": ("scratch", 1), "recv": ("scratch", 2), "recv2": ("scratch", 3),
               "gw2": ("gw", 1)} for inter in ("inter_allr", "inter_redsct")},
    "inter_allg": {}, "intra_allg": {}}
#: docs/DESIGN.md "HIER"'s offsets, for the message
HIER_PLACES_WHY = ("in scratch the first leg's RECV at 0, MID at one space, the inter leg's "
                   "RECV at two and a single-cycle leg's second at three; in gw the staging at "
                   "0 and a single-cycle leg's second at one")


def _refuse_older_hier_buffers(spec: TriggerSpec, leg: dict) -> None:
    """A HIER leg that is not SINGLE_CYCLE_RING lists neither ``recv2`` nor ``gw2`` (FORMATS
    §1.1), else an :class:`OutputError` (status 2) saying to lower the model again: an
    nrtrewrite before 2026-12-05 (0ee9775) listed both on every HIER leg, past the ends of
    their regions unless the trigger had a single-cycle leg, in outputs of the same format
    version whose artifacts are today's bytes.  Checked before the buffers' regions, so
    every such output gets this one message (until 2026-12-05 it was a protocol error,
    status 1: the role on the leg, or the buffer outside its region)."""
    if leg["algorithm"] == "SINGLE_CYCLE_RING":
        return
    for b, buf in enumerate(leg["buffers"]):
        if buf["role"] in SINGLE_CYCLE_ROLES:
            raise OutputError(f"hier.legs[{leg['at']}].buffers[{b}].role "
                              f"{json_text(buf['role'])} is on a {leg['algorithm']} leg (only "
                              "a single-cycle leg lists recv2 and gw2: FORMATS §1.1); an "
                              "nrtrewrite before 2026-12-05 listed them on every HIER leg: "
                              "lower the model again", **spec.where)


def _check_hier_leg_roles(spec: TriggerSpec, name: str, leg: dict) -> None:
    """A HIER leg's ``buffers`` (:func:`_resolve_hier`'s ``leg``, of leg ``name``) list role
    ``gw`` once, at offset 0 of the gw region, and ``recv2`` or ``gw2`` only on a
    SINGLE_CYCLE_RING leg (FORMATS §1.1), else a :class:`SimulationError` naming the key
    (until 2026-12-05 the roles were not read: a leg without its gateway view, or a ring leg
    with a single-cycle leg's second views inside their regions, simulated as a match).
    Then each other buffer's ``role`` is one of FORMATS' (:data:`HIER_ROLES`), listed once,
    and a view of this leg that lives in scratch or gw, at docs/DESIGN.md "HIER"'s region
    and offset (:data:`HIER_ROLE_PLACES`; a space is the trigger's ``num_elements``, an
    all-gather's times the group size, in bytes of its dtype; until 2026-12-05 such buffers
    were held to their regions only: a leg's RECV moved inside scratch onto MID simulated
    as a match)."""
    where = spec.where
    key = f"hier.legs[{leg['at']}].buffers"
    why = ("every HIER leg lists gw at offset 0 of the gw region, the gateway view every "
           "entry names: FORMATS §1.1")
    gws = [b for b, buf in enumerate(leg["buffers"]) if buf["role"] == "gw"]
    if len(gws) != 1:
        raise SimulationError(f"{key} should list 1 gw buffer, not {len(gws)} ({why})",
                              **where)
    gw = leg["buffers"][gws[0]]
    if (got := {"offset": gw["offset"], "region": gw["region"]}) != HIER_GW:
        raise SimulationError(f"{key}[{gws[0]}] (role gw) should be {json_text(HIER_GW)}, "
                              f"not {json_text(got)} ({why})", **where)
    places = HIER_ROLE_PLACES.get(name, {})
    space = spec.n * (len(spec.group) if spec.op == "ALLGATHER" else 1) * spec.dsize
    first: dict[str, int] = {}
    for b, buf in enumerate(leg["buffers"]):
        role = buf["role"]
        if role not in HIER_ROLES:
            *most, last = HIER_ROLES
            raise SimulationError(f"{key}[{b}].role should be {', '.join(most)} or {last}, not "
                                  f"{json_text(role)} (FORMATS §1.1)", **where)
        if (was := first.setdefault(role, b)) != b:
            raise SimulationError(f"{key}[{b}].role {json_text(role)} is buffers[{was}]'s too "
                                  "(a leg lists each of its views once: FORMATS §1.1)", **where)
        if role == "gw":
            continue
        if role not in places:
            there = ", ".join(["gw", *places])
            raise SimulationError(f"{key}[{b}] (role {role}) is not a view of {name} in scratch "
                                  f"or gw: its views there are {there} (a leg lists only the "
                                  "roles that live in scratch or gw: FORMATS §1.1, "
                                  "docs/DESIGN.md \"HIER\")", **where)
        region, spaces = places[role]
        want = {"offset": spaces * space, "region": region}
        if (got := {"offset": buf["offset"], "region": buf["region"]}) != want:
            raise SimulationError(f"{key}[{b}] (role {role}) should be {json_text(want)}, "
                                  f"not {json_text(got)} (docs/DESIGN.md \"HIER\": "
                                  f"{HIER_PLACES_WHY}; a space is the trigger's "
                                  f"{_space_text(spec)}, {counted(space, 'byte')})", **where)
    # every view of the leg in scratch or gw is listed (until 2026-12-05 a leg without its
    # recv, out, in or recv2 simulated as a match, and one without gw2 was blamed on
    # sb2sb.bin)
    views = [r for r in places if leg["algorithm"] == "SINGLE_CYCLE_RING"
             or r not in SINGLE_CYCLE_ROLES]
    if missing := [r for r in views if r not in first]:
        there = ", ".join(["gw", *views])
        raise SimulationError(f"{key} lacks role {missing[0]}: a {leg['algorithm']} {name} "
                              f"leg lists {there} (a leg lists each of its views in scratch "
                              "or gw: FORMATS §1.1, docs/DESIGN.md \"HIER\")", **where)


def _space_text(spec: TriggerSpec) -> str:
    """What one space of a HIER trigger's element space is, for a message: ``1000 BF16
    elements``, an all-gather's ``1600 FP16 elements (num_elements 100 x 16 ranks)``."""
    if spec.op == "ALLGATHER":
        return (f"{spec.n * len(spec.group)} {spec.dtype.name} elements (num_elements "
                f"{spec.n} x {len(spec.group)} ranks)")
    return f"{spec.n} {spec.dtype.name} elements"


def _hier_group_rule(intra_leg: bool, g: int, by_node: tuple) -> str:
    """What group ``g`` of an intra or inter HIER leg is (docs/DESIGN.md "HIER"), for
    :func:`check_hier_groups`'s message; ``by_node`` the replica group's ranks by node."""
    if intra_leg:
        return (f"an intra leg's group {g} is the ranks of node {by_node[g][0]} in the "
                "replica_group, in rank order (position j its j-th local rank: docs/DESIGN.md "
                "\"HIER\")")
    return (f"an inter leg's group {g} is the ranks of local index {g}, each node's rank at "
            f"position {g} of its intra group, in node order (position i node i: "
            "docs/DESIGN.md \"HIER\")")


def _plan_key(plan: tuple) -> tuple:
    """A HIER leg plan (:func:`_hier_legs`) as a value two copies share: each channel's ring
    order, by channel, its chunk, a KANGARING leg's ``kangaring`` items, by channel, and a
    SINGLE_CYCLE_RING leg's ``single_cycle``."""
    channels, chunk, kangaring, single_cycle = plan
    return (tuple(sorted((ch, tuple(order)) for ch, order in channels)),
            tuple(sorted(chunk.items())),
            tuple(sorted((ch, tuple(path), tuple(map(tuple, units)), dup)
                         for ch, path, units, dup in kangaring or ())),
            single_cycle and (tuple(map(tuple, single_cycle[0])), tuple(single_cycle[1]),
                              single_cycle[2]))


def _first_repeat(items: list) -> tuple[int, int] | None:
    """``(i, j)``: the first item given again, at ``j``, and where it was first, ``i``; None
    when every item differs."""
    first: dict = {}
    for j, item in enumerate(items):
        if item in first:
            return first[item], j
        first[item] = j
    return None


def _check_chunk(chunk: dict, key: str, where: dict, *, layout: bool) -> None:
    """A ``chunk`` (a trigger's, or a HIER leg plan's) whose ``chunk_size_n``, ``pgta`` or
    ``channels`` is below 1, or, where it is a chunk layout (``layout``), whose
    ``chunk_size_n`` is odd (seed 001 §2: ``set_chunk_size_n`` asserts an even chunk, cut
    into two equal halves CHUNK_H0 and CHUNK_H1) or whose ``tail_chunk`` (the last chunk
    group's chunk: seed 001 §2's re-clamped tail, even and at most the chunk, FORMATS §1.1)
    is not an even number from 2 to ``chunk_size_n``, is a :class:`SimulationError` naming
    ``key`` and the value: the legs are held to the chunk layout it gives."""
    for k in ("chunk_size_n", "pgta", "channels"):  # (a HIER trigger's: pgta only)
        if k in chunk and chunk[k] < 1:
            raise SimulationError(f"{key}.{k} should be 1 or more, not {chunk[k]}", **where)
    if layout:
        tail, cs = chunk["tail_chunk"], chunk["chunk_size_n"]
        if cs % 2:
            raise SimulationError(f"{key}.chunk_size_n should be even, not {cs} (a chunk is cut "
                                  "into two equal halves, CHUNK_H0 and CHUNK_H1: seed 001 §2)",
                                  **where)
        if not 2 <= tail <= cs or tail % 2:
            raise SimulationError(f"{key}.tail_chunk should be an even number from 2 to "
                                  f"chunk_size_n {cs}, not {tail}", **where)


def check_chunk_groups(triggers: dict[int, TriggerSpec]) -> None:
    """Each chunk layout's ``pgta`` and ``tail_chunk`` are seed 001 §2's for the elements it
    walks (:func:`_check_layout`), else a :class:`SimulationError` naming the key: a RING,
    SINGLE_CYCLE_RING or KANGARING trigger's ``chunk`` (the trigger's own layout is the
    ring's, docs/DESIGN.md "Leg layouts"), and, once a HIER trigger's ``hier.slices`` are
    DESIGN's (:func:`_check_hier_slices`), each of its leg plans' ``chunk`` for every group
    that runs it (:func:`_check_hier_layouts`).  The halves and ring steps of a RING
    trigger's legs are read from its layout (:meth:`TriggerSpec.half_of`,
    :meth:`TriggerSpec.chunk_of`), where a ``pgta`` short of it leaves elements in no chunk
    group, one too many moves ``tail_chunk`` off the last group that holds elements, and a
    wrong ``tail_chunk`` cuts the last group's chunks elsewhere; the other engines' legs are
    not read through it, and their numbers simulated as a match whatever they said.  Checked
    once the operands are placed (``num_elements`` fits them), so a count that does not fit
    its var is named as that rather than as the chunk layout it disagrees with."""
    for spec in triggers.values():  # (in the manifest's order)
        if spec.algorithm in CHUNK_LAYOUTS:
            span, _ = spec.ring_layout()
            alg = spec.algorithm
            if spec.op == "ALLREDUCE":
                subject, ranks = (f"a {alg} all-reduce's {span} elements", True), len(spec.group)
            else:
                op = "all-gather" if spec.op == "ALLGATHER" else "reduce-scatter"
                subject, ranks = (f"a {alg} {op}'s block of {span} elements", False), None
            _check_layout(spec.chunk, "chunk", subject, span, ranks, spec.where)
        elif spec.slices is not None:  # (a HIER trigger: its hier section)
            _check_hier_slices(spec)
            if spec.legs:
                _check_hier_layouts(spec)


def _check_layout(chunk: dict, key: str, subject: tuple[str, bool], span: int,
                  ranks: int | None, where: dict) -> None:
    """``chunk`` (at ``key``) cuts ``span`` elements as seed 001 §2 does, else a
    :class:`SimulationError` naming the key and saying why: ``pgta`` chunk groups of
    ``ranks`` x ``channels`` x ``chunk_size_n`` elements (an interleaved all-reduce layout,
    ``ranks`` the group size) or ``channels`` x ``chunk_size_n`` (a block, ``ranks`` None),
    ceil(span / group) of them (1 for no elements: an empty HIER slice), and the last group
    re-clamped (``reclamp_tail``, docs/DESIGN.md "Chunking"): ``tail_chunk`` the elements
    left for it over its chunk positions, rounded up to even, 2 at least (at most
    ``chunk_size_n``: it is, once ``pgta`` is right).  ``subject`` is what the layout cuts,
    as the message names it, and whether that is plural."""
    ch, cs = chunk["channels"], chunk["chunk_size_n"]
    positions = ch * (ranks or 1)
    per_group = f"chunk.channels {ch}"
    if ranks is not None:
        per_group = f"{counted(ranks, 'rank')} x {per_group}"
    group_elems = positions * cs
    text, plural = subject
    want = max(1, -(-span // group_elems))
    if chunk["pgta"] != want:
        raise SimulationError(f"{key}.pgta should be {want}, not {chunk['pgta']}: {text} "
                              f"{'take' if plural else 'takes'} ceil({span} / {group_elems}) "
                              f"chunk groups of {per_group} x chunk_size_n {cs} (seed 001 §2)",
                              **where)
    remained = span - (want - 1) * group_elems
    share = -(-remained // positions)
    tail = min(cs, max(2, share + share % 2))
    if chunk["tail_chunk"] != tail:
        raise SimulationError(f"{key}.tail_chunk should be {tail}, not {chunk['tail_chunk']}: "
                              f"the last chunk group of {text} holds {remained}, ceil({remained} / "
                              f"{positions}) a chunk position ({per_group}) rounded up to an "
                              "even 2 or more (seed 001 §2's re-clamped tail)", **where)


def _slice_sizes(n: int, parts: int) -> list[int]:
    """The sizes of the ``parts`` slices a HIER all-reduce cuts its ``n`` elements into, one
    per local index (docs/DESIGN.md "HIER", FORMATS §1.1 ``slices``): ``even_split``'s."""
    return [b - a for a, b in even_split(0, n, parts)]


def _check_hier_slices(spec: TriggerSpec) -> None:
    """A HIER trigger's ``hier.slices`` are docs/DESIGN.md "HIER"'s (FORMATS §1.1), else a
    :class:`SimulationError` naming the key and both values: an all-reduce's ``num_elements``
    cut by ``compose.segments.even_split`` into one slice per local index, as many as the
    ranks of an ``intra_redsct`` group (a node's ranks of the replica group; the first
    group's, as ``lower`` takes them); none for an all-gather or a reduce-scatter.  The legs'
    layouts are held to the same rule (:func:`_check_hier_layouts`), before this check with
    slices recomputed and the manifest's never read.  (An all-reduce has ``intra_redsct``
    groups holding its ranks: :func:`_check_hier_leg_names`, :func:`_check_hier_leg_groups`.)"""
    if spec.op == "ALLREDUCE":
        parts = len(spec.legs["intra_redsct"]["groups"][0][0])
        want = [list(s) for s in even_split(0, spec.n, parts)]
        why = (f"an all-reduce's {spec.n} elements in {parts} slices, one per local index "
               "(the ranks of an intra_redsct group), cut by even_split (docs/DESIGN.md "
               "\"HIER\")")
    else:
        want = []
        why = "only an all-reduce's message is cut into slices (FORMATS §1.1)"
    if spec.slices != want:
        raise SimulationError(f"hier.slices should be {json_text(want)}, not "
                              f"{json_text(spec.slices)}: {why}", **spec.where)


def _check_hier_layouts(spec: TriggerSpec) -> None:
    """Each HIER leg plan's ``chunk`` is the chunk layout of what its groups cut
    (:func:`_check_layout`, docs/DESIGN.md "HIER" and "Leg layouts"), and the trigger's
    ``chunk.pgta`` the most chunk groups of any of them (FORMATS §1.1).  An all-gather's or
    reduce-scatter's legs cut each position's blocks of ``num_elements`` (``num_elements`` /
    group size) elements; an all-reduce's ``inter_allr`` cuts its group's slice of the
    message (``compose.segments.even_split``, DESIGN's rule: the slice of the local index
    its ranks hold in their
    ``intra_redsct`` groups), interleaved over its ranks, and its intra legs cut each local
    rank's slice as a block, every slice of a group by the widest one's layout (the legs
    are ``select.HIER_LEGS``'s: :func:`_check_hier_leg_names`).  Then no leg lists a plan
    twice (the same ring orders and chunk; FORMATS §1.1: a leg's plans are distinct): checked
    after the layouts, so a plan whose tampered chunk equals another's is named for its
    layout."""
    n, size = spec.n, len(spec.group)
    local = {}  # rank -> (its local index, the local ranks of its node)
    for group, _orders, _pgta in spec.legs.get("intra_redsct", {}).get("groups", ()):
        local.update((r, (j, len(group))) for j, r in enumerate(group))
    for name, leg in spec.legs.items():
        i, alg = leg["at"], leg["algorithm"]
        for g, ((group, _o, _p), k) in enumerate(zip(leg["groups"], leg["plan_of"])):
            ranks = None
            if spec.op != "ALLREDUCE":
                span = n if spec.op == "ALLGATHER" else n // size
                subject = (f"a {alg} {name} leg's blocks of {span} elements", True)
            elif name == "inter_allr":
                j, parts = local[group[0]]
                span, ranks = _slice_sizes(n, parts)[j], len(group)
                subject = (f"slice {j} of the all-reduce, {span} elements, all-reduced by "
                           f"hier.legs[{i}].groups[{g}] (the ranks of local index {j}),", False)
            else:
                span = max(_slice_sizes(n, len(group)))
                subject = (f"a {alg} {name} leg's widest slice of the all-reduce, {span} "
                           "elements,", False)
            _check_layout(leg["chunks"][k], f"hier.legs[{i}].plans[{k}].chunk", subject,
                          span, ranks, spec.where)
        if (repeat := _first_repeat(leg["plan_keys"])) is not None:
            raise SimulationError(f"hier.legs[{i}].plans[{repeat[1]}] repeats "
                                  f"plans[{repeat[0]}] (a leg's plans are its groups' distinct "
                                  "plans, each once: FORMATS §1.1)", **spec.where)
    most = max((c["pgta"] for leg in spec.legs.values() for c in leg["chunks"]), default=1)
    if spec.pgta != most:
        raise SimulationError(f"chunk.pgta should be {most}, the most chunk groups of its "
                              f"legs' plans, not {spec.pgta} (a HIER trigger's, FORMATS §1.1)",
                              **spec.where)


def _check_channel_ids(spec: TriggerSpec, channels: list[tuple[int, list[int]]],
                       where: dict) -> None:
    """No channel id twice in ``channels``, and, for a RING, KANGARING or SINGLE_CYCLE_RING
    trigger, as many items as FORMATS §1.1 gives it: a RING or KANGARING trigger one per
    chunk channel (the channels its chunk layout divides the data over; a KANGARING one's
    until 2026-12-05 evening unchecked), a SINGLE_CYCLE_RING trigger two per chunk
    channel (``chunk.channels`` counts its CW / CCW pairs; a one-rank group's pair is one
    channel, CW and CCW alike: one); else a :class:`SimulationError` naming the key (the legs
    of a missing channel were blamed for its ring, a channel listed twice lost one order)."""
    if (twice := _first_repeat([ch for ch, _ in channels])) is not None:
        first, c = twice
        raise SimulationError(f"channels[{c}].channel {channels[c][0]} is channels[{first}]'s "
                              "too (a trigger lists each channel once)", **where)
    if spec.algorithm not in EVERY_CHANNEL_ENGINES:
        return
    per = 2 if spec.algorithm == "SINGLE_CYCLE_RING" and len(spec.group) > 1 else 1
    want = per * spec.chunk["channels"]
    if len(channels) != want:
        how = ("one per chunk channel" if per == 1 else
               "a CW and a CCW channel for each pair chunk.channels counts")
        raise SimulationError(f"channels should list the {counted(want, 'channel')} "
                              f"chunk.channels {spec.chunk['channels']} asks for, not "
                              f"{len(channels)} (a "
                              f"{spec.algorithm} trigger lists {how})", **where)


#: The ``channels`` FORMATS §1.1 writes for a trigger whose legs run on no ring of its own:
#: mesh and RDH one item, ``{"channel": 0, "order": []}``, HIER none (its legs' plans hold
#: their rings), each with why.
RINGLESS_CHANNELS = {
    **{a: ([(0, [])], "have no ring: one item") for a in ("MESH", "SINGLE_STEP_MESH",
                                                         "INTRA_RDH", "INTER_RDH")},
    "HIER": ([], "list none, their rings being their legs' plans'")}


def _check_ringless_channels(spec: TriggerSpec, channels: list[tuple[int, list[int]]],
                             where: dict) -> None:
    """A mesh or RDH trigger's ``channels`` is ``[{"channel": 0, "order": []}]`` and a HIER
    trigger's ``[]`` (:data:`RINGLESS_CHANNELS`), and each ``channels[c].order`` of a
    KANGARING trigger, the cycle of its primaries, names ranks of its replica group, each
    once, one or more (FORMATS §1.1), else a :class:`SimulationError` naming the key and both
    values (no leg reads these orders: until 2026-12-05 any simulated as a match).  Which
    ranks a KANGARING cycle holds, its units' primaries, is :func:`_check_kangaring`'s."""
    if spec.algorithm in RINGLESS_CHANNELS:
        want, why = RINGLESS_CHANNELS[spec.algorithm]
        if channels != want:
            def text(items):
                return json_text([{"channel": ch, "order": order} for ch, order in items])
            raise SimulationError(f"channels should be {text(want)}, not {text(channels)} "
                                  f"({spec.algorithm} triggers {why}, FORMATS §1.1)", **where)
    if spec.algorithm != "KANGARING":
        return
    members = set(spec.group)
    for c, (_ch, order) in enumerate(channels):
        key = f"channels[{c}].order"
        if not order:
            raise SimulationError(f"{key} is empty (a KANGARING trigger's order is the cycle "
                                  "of its primaries, 1 or more: FORMATS §1.1)", **where)
        if (stranger := next((r for r in order if r not in members), None)) is not None:
            raise SimulationError(f"{key} names rank {stranger}, not in the replica_group",
                                  **where)
        if (twice := _first_repeat(order)) is not None:
            raise SimulationError(f"{key} lists rank {order[twice[1]]} twice (a KANGARING "
                                  "trigger's order is the cycle of its primaries, each once: "
                                  "FORMATS §1.1)", **where)


#: A kangaring unit: its primary and at most KANGARING_MAX_SECONDARIES (3) secondaries
#: (docs/TOPOLOGY.md §4).
KANGARING_UNIT_MAX = 4


def _check_kangaring(section: list[tuple], channels: list[tuple[int, list[int]]], members,
                     noun: str, at: str, where: dict, of_what: str) -> None:
    """A KANGARING trigger's ``kangaring`` section (``at`` "") or a KANGARING HIER leg plan's
    (``at`` ``hier.legs[i].plans[k].``, ranks as positions in the group ``of_what``: one
    check per group that runs the plan) is its channels' (docs/FORMATS.md §1.1,
    docs/TOPOLOGY.md §4), else a :class:`SimulationError` naming the key: one item per item
    of ``channels``, in order, with its channel id; each unit 1 to 4 of ``members`` (ranks of
    the replica group, or positions), the units holding each member once (every rank is a
    primary or a secondary on each channel: the simulator holds every rank's entry to every
    channel, :data:`EVERY_CHANNEL_ENGINES`); the channel's ``order`` the units' primaries in
    the units' order; ``logical_path`` the units one after the other; ``duplicate`` whether
    an earlier channel has the same directed cycle of primaries and the same units
    (``topology.rings.kangaring_identity``, ``lower``'s rule).  Until 2026-12-05 the section
    was not read: units missing a rank, or primaries other than the order, simulated as a
    match."""
    key = f"{at}kangaring"
    owner = "trigger" if not at else "leg's plan"
    why = (f"(a KANGARING {owner} lists one kangaring item per channel, in the order of its "
           "channels: FORMATS §1.1)")
    if len(section) != len(channels):
        raise SimulationError(f"{key} should list {counted(len(channels), 'item')}, one per "
                              f"channel of {at}channels, not {len(section)} {why}", **where)
    inside = set(members)
    each = (f"(the units of a KANGARING channel hold each {noun} of {of_what} once: "
            "docs/TOPOLOGY.md §4)")
    seen: dict = {}
    for c, ((ch, order), (kch, path, units, dup)) in enumerate(zip(channels, section)):
        item = f"{key}[{c}]"
        if kch != ch:
            raise SimulationError(f"{item}.channel should be {at}channels[{c}].channel {ch}, not "
                                  f"{kch} {why}", **where)
        for u, unit in enumerate(units):
            if not 1 <= len(unit) <= KANGARING_UNIT_MAX:
                raise SimulationError(f"{item}.units[{u}] should list 1 to "
                                      f"{KANGARING_UNIT_MAX} {noun}s, not {len(unit)} (a unit "
                                      "is a primary and at "
                                      "most 3 secondaries, KANGARING_MAX_SECONDARIES: "
                                      "docs/TOPOLOGY.md §4)", **where)
        flat = [m for unit in units for m in unit]
        if (stranger := next((m for m in flat if m not in inside), None)) is not None:
            place = "not in" if noun == "rank" else "outside"
            raise SimulationError(f"{item}.units names {noun} {stranger}, {place} {of_what} "
                                  f"{each}", **where)
        if (twice := _first_repeat(flat)) is not None:
            raise SimulationError(f"{item}.units lists {noun} {flat[twice[1]]} twice {each}",
                                  **where)
        listed = set(flat)
        if (missing := next((m for m in members if m not in listed), None)) is not None:
            raise SimulationError(f"{item}.units lacks {noun} {missing} {each}", **where)
        primaries = [unit[0] for unit in units]
        if order != primaries:
            raise SimulationError(f"{at}channels[{c}].order should be {json_text(primaries)}, the "
                                  f"primaries of {item}.units in order, not {json_text(order)} "
                                  f"(a KANGARING order is the cycle of its units' "
                                  f"primaries, each unit's first {noun}: FORMATS §1.1)", **where)
        if path != flat:
            raise SimulationError(f"{item}.logical_path should be {json_text(flat)}, its units "
                                  f"one after the other, not {json_text(path)} (each "
                                  "primary, then its secondaries: docs/TOPOLOGY.md §4)", **where)
        ident = kangaring_identity(tuple(tuple(unit) for unit in units))
        first = seen.setdefault(ident, c)
        if dup != (first != c):
            if first != c:
                said = (f"its primaries form the directed cycle of {key}[{first}]'s, with the "
                        "same units")
            else:
                said = ("no channel before it has its directed cycle of primaries with the same "
                        "units")
            raise SimulationError(f"{item}.duplicate should be {json.dumps(not dup)}, not "
                                  f"{json.dumps(dup)}: {said} (docs/TOPOLOGY.md §4)",
                                  **where)


def _check_single_cycle(section: tuple, channels: list[tuple[int, list[int]]],
                        chunk_channels: int, n: int, at: str, where: dict, of_what: str
                        ) -> None:
    """A SINGLE_CYCLE_RING trigger's ``single_cycle`` section (``at`` "") or a
    SINGLE_CYCLE_RING HIER leg plan's (``at`` ``hier.legs[i].plans[k].``, its orders in
    positions: one check per group that runs the plan, ``of_what`` the group of ``n`` ranks)
    is its channels' and its group's (docs/FORMATS.md §1.1, docs/DESIGN.md "Single-cycle
    ring"), else a :class:`SimulationError` naming the key: ``pairs`` one per chunk channel
    (``chunk.channels``), pair k ``[channels[2k].channel, channels[2k+1].channel]``, the CW
    and CCW channel (a one-rank group's ``[channels[k].channel]`` twice: its one channel is
    CW and CCW alike); each CCW channel's order its CW channel's ring walked backward (the
    reverse, from any rank); ``arcs`` ``[ceil((n-1)/2), floor((n-1)/2)]``; and
    ``steps_per_group`` ``2 * ceil((n-1)/2)``, one cycle.  Until 2026-12-05 the section was
    not read: pairs naming other channels, or arcs and steps of another group size,
    simulated as a match."""
    pairs, arcs, steps = section
    key = f"{at}single_cycle"
    if len(pairs) != chunk_channels:
        raise SimulationError(f"{key}.pairs should list the {counted(chunk_channels, 'pair')} "
                              f"{at}chunk.channels counts, not {len(pairs)} (one [CW channel, "
                              "CCW channel] per chunk channel: FORMATS §1.1)", **where)
    ids = [ch for ch, _ in channels]
    if n == 1:
        want = [[ch, ch] for ch in ids]
        how = ("a one-rank group's pair k is channels[k].channel twice, its one channel CW and "
               "CCW alike")
    else:
        want = [ids[i:i + 2] for i in range(0, len(ids), 2)]
        how = ("pair k is [channels[2k].channel, channels[2k+1].channel], the CW and the CCW "
               "channel of chunk channel k")
    if pairs != want:
        raise SimulationError(f"{key}.pairs should be {json_text(want)}, the ids of "
                              f"{at}channels in pairs, not {json_text(pairs)} ({how}: "
                              "FORMATS §1.1)",
                              **where)
    if n > 1:
        for k in range(len(pairs)):
            cw, ccw = channels[2 * k][1], channels[2 * k + 1][1]
            back = list(reversed(cw))
            if len(ccw) != len(back) or not any(ccw == back[i:] + back[:i]
                                                for i in range(len(back))):
                raise SimulationError(
                    f"{at}channels[{2 * k + 1}].order should be {at}channels[{2 * k}].order "
                    f"{json_text(cw)} reversed, not {json_text(ccw)} ({key}.pairs[{k}] "
                    f"makes channel {channels[2 * k + 1][0]} the CCW channel of "
                    f"{channels[2 * k][0]}: a CCW channel walks its CW channel's ring backward, "
                    "the reversed order from any rank: FORMATS §1.1)", **where)
    h_cw, h_ccw = -(-(n - 1) // 2), (n - 1) // 2
    if arcs != [h_cw, h_ccw]:
        raise SimulationError(f"{key}.arcs should be {json_text([h_cw, h_ccw])}, "
                              f"[ceil((n-1)/2), floor((n-1)/2)] for {of_what}, not "
                              f"{json_text(arcs)} (the ranks "
                              "reducing toward a chunk's root clockwise and counter-clockwise: "
                              "docs/DESIGN.md \"Single-cycle ring\")", **where)
    if steps != 2 * h_cw:
        raise SimulationError(f"{key}.steps_per_group should be {2 * h_cw}, "
                              f"2 * ceil((n-1)/2) for {of_what}, not {steps} (one cycle: "
                              "docs/DESIGN.md "
                              "\"Single-cycle ring\")", **where)


def _check_ring_order(order: list[int], members, noun: str, key: str, lacks,
                      where: dict) -> None:
    """``order`` lists each of ``members`` (ranks, or positions in a group) once, else a
    :class:`SimulationError` naming ``key``: a stranger, one twice, or the first one missing
    (``lacks(missing)`` says of what)."""
    members = list(members)
    inside = set(members)
    stranger = next((r for r in order if r not in inside), None)
    if stranger is not None:
        raise SimulationError(f"{key} names {noun} {stranger}, not in the replica_group",
                              **where)
    if (twice := _first_repeat(order)) is not None:
        raise SimulationError(f"{key} lists {noun} {order[twice[1]]} twice", **where)
    listed = set(order)
    missing = next((r for r in members if r not in listed), None)
    if missing is not None:
        raise SimulationError(f"{key} lacks {noun} {missing} {lacks(missing)}", **where)


def _check_ring_orders(spec: TriggerSpec, channels: list[tuple[int, list[int]]],
                       where: dict) -> None:
    """Each ``channels[c].order`` of a RING or SINGLE_CYCLE_RING trigger lists every rank of
    its ``replica_group`` once (a ring of the group, FORMATS §1.1), else a
    :class:`SimulationError` naming the key: the ring successors the legs are held to come
    from it."""
    for c, (_, order) in enumerate(channels):
        _check_ring_order(order, spec.group, "rank", f"channels[{c}].order",
                          lambda _r: f"of the replica_group (a {spec.algorithm} trigger's ring "
                          "order holds each rank once)", where)


def load_triggers(top: dict, *, file: str = "") -> dict[int, TriggerSpec]:
    """The manifest's ``triggers``: :func:`read_triggers`, then :func:`check_triggers` (every
    type before any value)."""
    return check_triggers(read_triggers(top, file=file))


def check_against_model(triggers: dict[int, TriggerSpec], model, *, file: str = "") -> None:
    """The manifest's triggers are the input model's triggers (what the simulator checks is
    what the model asked for, not what the lowering says it asked for)."""
    want = {t.ordinal: t for t in model.triggers}
    if set(want) != set(triggers):
        raise SimulationError(f"the manifest should list triggers {sorted(want)}, the "
                              f"model's, not {sorted(triggers)}", file=file, field="triggers")
    for o, t in want.items():
        s = triggers[o]
        pairs = {  # (the manifest's value, the model's), each as the manifest writes it
            "op": (s.op, t.op.name), "dtype": (s.dtype.name, t.dtype.name),
            "alu_op": (s.alu, t.alu_op.name if t.alu_op is not None else None),
            "num_elements": (s.n, t.num_elements),
            "replica_group": (list(s.group), list(t.replica_group)),
            "subgraph": (s.subgraph, t.subgraph), "engine": (s.engine, t.engine),
            "index": (s.index, t.index),
            "src": ({k: s.src.get(k) for k in ("var_id", "offset", "ap") if k in s.src or k != "ap"},
                    t.src.to_json()),
            "dst": ({k: s.dst.get(k) for k in ("var_id", "offset", "ap") if k in s.dst or k != "ap"},
                    t.dst.to_json()),
        }
        for key, (got, exp) in pairs.items():
            if got != exp:  # (named as check_triggers names a trigger's values)
                raise SimulationError(f"the manifest's {key} should be {json_text(exp)}, the "
                                      f"model's trigger {o}'s, not {json_text(got)}",
                                      **dict(s.where, file=s.where.get("file") or file))
