"""The op-param records of the mesh and RDH step recorders (seed 003 §2-3), and their lowering
to leg IR rows.

Seed 003 names three records a scheduled step becomes before the device packer sees it:

* :class:`EncReduceOpParams` (``enc_reduce_op_params``, 104 B): N sources reduced into M
  destinations, with the neighbour-group index of each address;
* :class:`EncCopyOpParams` (``enc_copy_op_params``, 184 B): one source fanned out to M
  destinations, with per-destination source offsets, skip flags, ranks and sizes;
* :class:`RdhTransfer` (``rdh_transfer``, 120 B): the RDH scheduler's unit, source and
  destination (device, address) pairs and a size.

Field names are the seed's.  An address (``dma_addr_t`` in the runtime) is an :class:`Addr`
here: element ``elem`` of buffer view ``view`` of the entry (:mod:`nrtrewrite.compose.views`);
the device that owns it is given beside it (``src_idx`` / ``d_ranks`` / ``src_devs``...), and
the emitter resolves the pair to a SoC address.  Sizes are bytes, as in the runtime.

The recorders are here too: :func:`prepare_reduce_params` (``enc_mesh_primitive::
prepare_reduce_params``), :func:`submit_rdh_cce_transfers`, :func:`submit_rdh_copy_transfers`
and :func:`can_use_cme_sdma`; :func:`check_copy_params` is ``enc_primitive_mesh::send``'s
per-destination assert battery, raised as :class:`LoweringError` (never ``assert``).  The
``*_rows`` functions turn records into leg IR rows (:mod:`nrtrewrite.compose.ir`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple, Sequence

import numpy as np

from nrtrewrite.codes import ReductionType
from nrtrewrite.compose import ir as IR
from nrtrewrite.errors import LoweringError

#: copy_size < UINT32_MAX (enc_primitive.cc:0x77C).
UINT32_MAX = 0xFFFF_FFFF
#: PAGETABLE_TYPE_INPUT / PAGETABLE_TYPE_OUTPUT of __get_pgt_offset.
PAGETABLE_TYPE_INPUT = 0
PAGETABLE_TYPE_OUTPUT = 1


class Addr(NamedTuple):
    """A DMA address: element ``elem`` (of the collective's element space) of view ``view``."""

    view: int
    elem: int


@dataclass
class EncReduceOpParams:
    """enc_reduce_op_params: ``s_addrs[i]`` of neighbour ``src_idx[i]`` reduced into every
    ``d_addrs[j]`` of neighbour ``dst_idx[j]``, ``reduce_size`` bytes."""

    s_addrs: list[Addr] = field(default_factory=list)
    src_idx: list[int] = field(default_factory=list)
    d_addrs: list[Addr] = field(default_factory=list)
    dst_idx: list[int] = field(default_factory=list)
    reduce_size: int = 0


@dataclass
class EncCopyOpParams:
    """enc_copy_op_params: ``s_addr`` (of neighbour ``src_idx``) plus ``s_offsets[d]`` bytes
    copied to ``d_addrs[d]`` on rank ``d_ranks[d]``, ``copy_sizes[d]`` bytes, unless
    ``d_skip_copy[d]``.  The four destination vectors (and ``s_offsets``) are length-locked."""

    src_idx: int = 0
    s_addr: Addr = Addr(0, 0)
    nccl_mhandle: int | None = None  # net memory registration of the source (network sends)
    s_offsets: list[int] = field(default_factory=list)
    d_addrs: list[Addr] = field(default_factory=list)
    d_skip_copy: list[bool] = field(default_factory=list)
    d_ranks: list[int] = field(default_factory=list)
    copy_sizes: list[int] = field(default_factory=list)
    host_d_addr: int | None = None
    dst_nccl_mhandle: int | None = None


@dataclass
class RdhTransfer:
    """rdh_transfer: ``size`` bytes from every ``(src_devs[i], src_addrs[i])`` (reduced when
    there are several) to every ``(dst_devs[j], dst_addrs[j])``."""

    idx: int = 0
    src_devs: list[int] = field(default_factory=list)
    src_addrs: list[Addr] = field(default_factory=list)
    dst_devs: list[int] = field(default_factory=list)
    dst_addrs: list[Addr] = field(default_factory=list)
    size: int = 0
    dst_idx: int = 0


# ---------------------------------------------------------------------------------------------
# neighbour groups (enc_comm_info) and get_idx_in_group

@dataclass(frozen=True)
class NeighborGroups:
    """The neighbour groups of one rank: ``groups[g]`` lists the ranks of group ``g``; a
    record's ``src_idx`` / ``dst_idx`` is a position in one of them (seed 003 §2 GOTCHA)."""

    groups: tuple[tuple[int, ...], ...]

    def idx_in_group(self, grp: int, dev: int) -> int:
        """get_idx_in_group(ci, grp, dev): the position of ``dev`` in group ``grp``."""
        if not 0 <= grp < len(self.groups):
            raise LoweringError(f"neighbour group {grp} does not exist "
                                f"({len(self.groups)} groups)")
        try:
            return self.groups[grp].index(dev)
        except ValueError:
            raise LoweringError(f"rank {dev} is not in neighbour group {grp} "
                                f"{list(self.groups[grp])}") from None

    def rank(self, grp: int, idx: int) -> int:
        if not 0 <= grp < len(self.groups) or not 0 <= idx < len(self.groups[grp]):
            raise LoweringError(f"neighbour index {idx} of group {grp} does not exist")
        return self.groups[grp][idx]


# ---------------------------------------------------------------------------------------------
# prepare_reduce_params (enc_mesh_primitive, seed 003 §3)

class TransactionInfo(NamedTuple):
    """One input (or the output) transaction of a mesh reduce event (the runtime's
    ``transaction_info``, seed 003 §3): the buffer's first element (``base``), the neighbour
    it belongs to (``neighbor_idx``: the seed's ``src_neighbor_idx`` of an input; an
    output's neighbour is found by ``find_dst_neighbor_idx``) and the page table's DMA
    size in bytes per page (``dma_size``: the seed's ``input_dma_size``)."""

    base: Addr
    neighbor_idx: int
    dma_size: int


def get_pgt_offset(txn: TransactionInfo, offset: int, total: int) -> tuple[int, int]:
    """__get_pgt_offset: (virtual offset, DMA size) of byte ``offset`` of a ``total``-byte
    transfer: pages of ``txn.dma_size`` bytes, the last one short."""
    if txn.dma_size <= 0:
        raise LoweringError("a page table needs a positive DMA size")
    page_left = txn.dma_size - offset % txn.dma_size
    return offset, min(page_left, total - offset)


def prepare_reduce_params(events: dict, event_id: int, in_txns: Sequence[TransactionInfo],
                          out_txn: TransactionInfo, total_size: int, dsize: int,
                          find_dst_neighbor_idx: Callable[[TransactionInfo], int]
                          ) -> list[EncReduceOpParams]:
    """enc_mesh_primitive::prepare_reduce_params: one record per page-table chunk, each with
    one source per input transaction and the output's destination neighbour;
    ``reduce_size = min(dma size, remaining)``."""
    ev = events.get(event_id)
    if ev is None or not getattr(ev, "valid", False):
        raise LoweringError(f"prepare_reduce_params: event {event_id} is not a valid event of "
                            "the schedule")
    if total_size % dsize:
        raise LoweringError(f"reduce of {total_size} bytes is not a whole number of "
                            f"{dsize}-byte elements")
    if total_size > 0 and not in_txns:
        raise LoweringError("prepare_reduce_params: a reduce without input transactions")
    # the checks of a page depend on the transaction only through its DMA size: check the first
    # transaction of each size, in order (so the first failing transaction is the one named)
    first_of_size: dict[int, TransactionInfo] = {}
    for txn in in_txns:
        first_of_size.setdefault(txn.dma_size, txn)
    out: list[EncReduceOpParams] = []
    remaining, offset = total_size, 0
    while remaining > 0:
        dma_of_size = {}
        for size, txn in first_of_size.items():
            voff, dma_sz = get_pgt_offset(txn, offset, total_size)
            if not (dma_sz == remaining or dma_sz == txn.dma_size):
                raise LoweringError(f"page table of neighbour {txn.neighbor_idx}: DMA size "
                                    f"{dma_sz} is neither the remaining {remaining} bytes nor "
                                    f"a page ({txn.dma_size})")
            if voff % dsize:
                raise LoweringError("a page boundary splits an element")
            dma_of_size[size] = dma_sz
        dma_sz = dma_of_size[in_txns[-1].dma_size] if in_txns else 0
        k = offset // dsize  # every page starts at the same virtual offset
        op = EncReduceOpParams(s_addrs=[Addr(t.base.view, t.base.elem + k) for t in in_txns],
                               src_idx=[t.neighbor_idx for t in in_txns])
        voff_o, _ = get_pgt_offset(out_txn, offset, total_size)
        dst_nbr = find_dst_neighbor_idx(out_txn)
        if dst_nbr == -1:
            raise LoweringError("prepare_reduce_params: no destination neighbour")
        op.d_addrs.append(Addr(out_txn.base.view, out_txn.base.elem + voff_o // dsize))
        op.dst_idx.append(dst_nbr)
        op.reduce_size = min(dma_sz, remaining)
        out.append(op)
        remaining -= op.reduce_size
        offset += op.reduce_size
    return out


# ---------------------------------------------------------------------------------------------
# RDH (seed 003 §2-3)

def can_use_cme_sdma(transfers: Sequence[RdhTransfer]) -> bool:
    """can_use_cme_sdma: the CME-SDMA path takes a transfer vector only when every transfer is
    a 1:1 copy (one source address, one destination address)."""
    return all(len(t.src_addrs) == 1 and len(t.dst_addrs) == 1 for t in transfers)


def _check_transfer(t: RdhTransfer) -> None:
    if len(t.src_devs) != len(t.src_addrs):
        raise LoweringError(f"rdh_transfer {t.idx}: {len(t.src_devs)} src_devs but "
                            f"{len(t.src_addrs)} src_addrs (enc_primitive.cc:0x1B1E)")
    if len(t.dst_devs) != len(t.dst_addrs):
        raise LoweringError(f"rdh_transfer {t.idx}: {len(t.dst_devs)} dst_devs but "
                            f"{len(t.dst_addrs)} dst_addrs")
    if not t.src_addrs or not t.dst_addrs or t.size <= 0:
        raise LoweringError(f"rdh_transfer {t.idx}: needs a source, a destination and a size")


def submit_rdh_cce_transfers(transfers: Sequence[RdhTransfer], ngroups: NeighborGroups, grp: int,
                             evt_id: list[int]) -> list[EncReduceOpParams]:
    """submit_rdh_cce_transfers: each transfer becomes one enc_reduce_op_params; the source
    index is resolved in neighbour group ``grp``, the destination index in group ``grp + 1``
    (seed 003 §2 GOTCHA).  ``evt_id`` is the event cursor, advanced once per transfer."""
    out = []
    for t in transfers:
        _check_transfer(t)
        op = EncReduceOpParams(reduce_size=t.size)
        for dev, addr in zip(t.src_devs, t.src_addrs):
            op.s_addrs.append(addr)
            op.src_idx.append(ngroups.idx_in_group(grp, dev))
        for dev, addr in zip(t.dst_devs, t.dst_addrs):
            op.d_addrs.append(addr)
            op.dst_idx.append(ngroups.idx_in_group(grp + 1, dev))
        evt_id[0] += 1
        out.append(op)
    return out


def submit_rdh_copy_transfers(transfers: Sequence[RdhTransfer], ngroups: NeighborGroups, grp: int,
                              evt_id: list[int]) -> list[EncCopyOpParams]:
    """submit_rdh_copy_transfers: each (single-source) transfer becomes one
    enc_copy_op_params fanning its source out to every destination."""
    out = []
    for t in transfers:
        _check_transfer(t)
        if len(t.src_addrs) != 1:
            raise LoweringError(f"rdh_transfer {t.idx}: a copy has one source, not "
                                f"{len(t.src_addrs)}")
        n = len(t.dst_addrs)
        out.append(EncCopyOpParams(
            src_idx=ngroups.idx_in_group(grp, t.src_devs[0]), s_addr=t.src_addrs[0],
            s_offsets=[0] * n, d_addrs=list(t.dst_addrs), d_skip_copy=[False] * n,
            d_ranks=list(t.dst_devs), copy_sizes=[t.size] * n))
        evt_id[0] += 1
    return out


# ---------------------------------------------------------------------------------------------
# enc_primitive_mesh::send's checks

def check_copy_params(op: EncCopyOpParams, *, net_ranks: frozenset[int] = frozenset()) -> None:
    """The parallel-vector discipline of enc_copy_op_params (seed 003 §2 NOTE): d_addrs,
    d_skip_copy, d_ranks, copy_sizes (and s_offsets) have one entry per destination; per
    destination ``copy_size < UINT32_MAX``; a destination on the network needs the source's
    ``nccl_mhandle``."""
    n = len(op.d_addrs)
    lengths = {"d_addrs": n, "d_skip_copy": len(op.d_skip_copy), "d_ranks": len(op.d_ranks),
               "copy_sizes": len(op.copy_sizes), "s_offsets": len(op.s_offsets)}
    if len(set(lengths.values())) != 1:
        raise LoweringError("enc_copy_op_params vectors are not length-locked ("
                            + ", ".join(f"{k} {v}" for k, v in lengths.items()) + ")")
    if n and (min(op.copy_sizes) >= 0 and max(op.copy_sizes) < UINT32_MAX
              and min(op.s_offsets) >= 0
              and (op.nccl_mhandle is not None or net_ranks.isdisjoint(op.d_ranks))):
        return  # every destination passes (the common case); else find the first that fails
    for dst in range(n):
        if dst >= len(op.d_addrs):  # enc_primitive.cc:0x75F
            raise LoweringError(f"destination {dst} outside d_addrs ({len(op.d_addrs)})")
        if dst >= len(op.copy_sizes):  # enc_primitive.cc:0x764
            raise LoweringError(f"copy size index {dst} outside copy_sizes")
        size = op.copy_sizes[dst]
        if not 0 <= size < UINT32_MAX:  # enc_primitive.cc:0x77C
            raise LoweringError(f"destination {dst}: copy size {size} is not below UINT32_MAX")
        if op.d_ranks[dst] in net_ranks and op.nccl_mhandle is None and not op.d_skip_copy[dst]:
            raise LoweringError(f"destination {dst} (rank {op.d_ranks[dst]}) is across the "
                                "network but the source has no nccl_mhandle (enc_primitive.cc:"
                                "0x77D)")
        if op.s_offsets[dst] < 0:
            raise LoweringError(f"destination {dst}: negative source offset")


# ---------------------------------------------------------------------------------------------
# records -> leg IR rows

@dataclass
class RowSpec:
    """Synchronisation and labels of the rows a record lowers to."""

    channel: int
    leaf: int
    phase: int = 0  # the event type (mesh / RDH rows), shown by `schedule`
    step: int = 0
    waits: tuple[tuple[int, int], ...] = ()  # (semaphore id, value) on the first row
    gw_view: int = IR.NO_VIEW


def _rows(n: int, spec: RowSpec) -> np.ndarray:
    rows = IR.empty(n)
    rows["channel"] = spec.channel
    rows["leaf"] = spec.leaf
    rows["phase"] = spec.phase
    rows["step"] = spec.step
    rows["gw_view"] = spec.gw_view
    return rows


def set_waits(row: np.ndarray, waits: Sequence[tuple[int, int]]) -> None:
    waits = [(s, v) for s, v in waits if v > 0]
    if len(waits) > IR.MAX_WAIT:
        raise LoweringError(f"a leg waits on {len(waits)} semaphores; the leg IR holds "
                            f"{IR.MAX_WAIT}")
    row["n_wait"] = len(waits)
    for k, (sem, val) in enumerate(waits):
        row["wait_sem"][k] = sem
        row["wait_val"][k] = val


def _put(rows: np.ndarray, row: Sequence[int], slot: Sequence[int], **columns) -> None:
    """``rows[field][row[c], slot[c]] = values[c]`` for each ``field=values`` of subarray
    fields (``src_view``, ``inc_peer``...): the cells are gathered as Python lists by the
    caller and written with one fancy assignment per field (the index lists converted once),
    or one by one when they are few (cheaper than converting the index lists)."""
    if not row:
        return
    if len(row) <= _FEW_CELLS:
        for f, values in columns.items():
            view = rows[f]
            for r, k, v in zip(row, slot, values):
                view[r, k] = v
        return
    cells = (np.array(row), np.array(slot))  # converted once for every field
    for f, values in columns.items():
        rows[f][cells] = values


#: Up to this many cells, :func:`_put` assigns item by item.
_FEW_CELLS = 16


def _packed(row: list[int], keep: list[bool], n_rows: int) -> tuple[list[int], list[int]]:
    """(slot of each kept cell, kept cells per row): the cells of ``row`` (in row order) with
    ``keep``, numbered from 0 within their row."""
    count = [0] * n_rows
    slot = []
    for r, k in zip(row, keep):
        if k:
            slot.append(count[r])
            count[r] += 1
    return slot, count


def copy_rows(op: EncCopyOpParams, spec: RowSpec, dsize: int, src_peer: int,
              peer_index: Callable[[int], int], signal: Callable[[int], int | None], *,
              net_ranks: frozenset[int] = frozenset()) -> np.ndarray:
    """One enc_copy_op_params as IR rows: the destinations that are not skipped, grouped by
    element range (a leg moves one range), at most MAX_DST per row.  ``src_peer`` is the peer
    index of the source's owner (neighbour ``op.src_idx``), ``peer_index(rank)`` a rank's;
    ``signal(rank)`` the semaphore each destination rank gets one increment on (None: none).
    ``peer_index`` is called for each destination in row order (it may number a rank on first
    sight), then ``signal``.  The rows are built as Python lists, written column by column."""
    check_copy_params(op, net_ranks=net_ranks)
    # the destinations that copy, and their element ranges
    copying = [i for i, (size, skip) in enumerate(zip(op.copy_sizes, op.d_skip_copy))
               if size and not skip]
    offsets = [op.s_offsets[i] for i in copying]
    sizes = [op.copy_sizes[i] for i in copying]
    e0 = op.s_addr.elem
    first = [e0 + off // dsize for off in offsets]
    for i, off, size, start in zip(copying, offsets, sizes, first):
        if off % dsize or size % dsize:
            raise LoweringError("a copy offset or size is not a whole number of elements")
        if op.d_addrs[i].elem != start:
            raise LoweringError(f"destination {i}: the leg IR moves one element range, but "
                                f"the source is at element {start} and the destination at "
                                f"{op.d_addrs[i].elem}")
    last = [start + size // dsize for start, size in zip(first, sizes)]
    # grouped by element range in order of first appearance
    ranges: dict[tuple[int, int], list[int]] = {}
    for i, a, b in zip(copying, first, last):
        ranges.setdefault((a, b), []).append(i)
    # one row per MAX_DST destinations of a range: destination c is cell (row[c], slot[c])
    if len(ranges) == len(copying):  # every range its own: one row per destination
        starts, stops, order = first, last, copying
        row, slot, n_dst = list(range(len(order))), [0] * len(order), [1] * len(order)
    else:
        starts, stops, n_dst, order, row, slot = [], [], [], [], [], []
        for (a, b), members in ranges.items():
            for k in range(0, len(members), IR.MAX_DST):
                chunk = members[k:k + IR.MAX_DST]
                row += [len(starts)] * len(chunk)
                slot += range(len(chunk))
                order += chunk
                starts.append(a)
                stops.append(b)
                n_dst.append(len(chunk))
    rows = _rows(len(starts), spec)
    if not starts:
        return rows
    ranks = [op.d_ranks[i] for i in order]
    peers = [peer_index(r) for r in ranks]
    sems = [signal(r) for r in ranks]
    rows["start"] = starts
    rows["stop"] = stops
    rows["n_src"] = 1
    rows["src_view"][:, 0] = op.s_addr.view
    rows["src_peer"][:, 0] = src_peer
    rows["n_dst"] = n_dst
    _put(rows, row, slot, dst_view=[op.d_addrs[i].view for i in order], dst_peer=peers)
    # increments: the destinations with a semaphore, in destination order, packed per row
    if None in sems:
        has = [sm is not None for sm in sems]
        inc_slot, n_inc = _packed(row, has, len(starts))
        row = [r for r, h in zip(row, has) if h]
        peers = [p for p, h in zip(peers, has) if h]
        sems = [sm for sm in sems if sm is not None]
    else:
        inc_slot, n_inc = slot, n_dst
    rows["n_inc"] = n_inc
    _put(rows, row, inc_slot, inc_peer=peers, inc_sem=sems, inc_val=[1] * len(row))
    if spec.waits:  # (fresh rows wait on nothing)
        set_waits(rows[0], spec.waits)
    return rows


def _split(addrs: Sequence[Addr]) -> tuple[Sequence[int], Sequence[int]]:
    """(views, elements) of ``addrs``."""
    return tuple(zip(*addrs)) if addrs else ((), ())


def chain_starts(sources: int) -> range:
    """Where each link after the first of :func:`reduce_rows`' chain of a record of
    ``sources`` sources starts in them: the first link reduces MAX_SRC sources, each next one
    the chain's destination and MAX_SRC - 1 more."""
    return range(IR.MAX_SRC, sources, IR.MAX_SRC - 1)


def chain_links(sources: int) -> int:
    """The rows (links) :func:`reduce_rows` chains a record of ``sources`` sources into."""
    return 1 + len(chain_starts(sources))


def reduce_rows(ops: Sequence[EncReduceOpParams], spec: RowSpec, dsize: int,
                ngroups: NeighborGroups, src_grp: int, dst_grp: int,
                peer_index: Callable[[int], int], signal: Callable[[int], int | None] | None = None
                ) -> np.ndarray:
    """enc_reduce_op_params records as CCE reduce rows.

    A record with more sources than a leg holds (MAX_SRC) becomes a chain over its single
    destination: the first row reduces MAX_SRC sources into it, each next row reduces it with
    the next MAX_SRC - 1 sources (NR1W; every partial is rounded once to the I/O dtype).  A
    two-source row is the ring's 2-reader/1-writer shape (RING_2R1W), a wider one
    KANGARING_NR1W.  ``peer_index`` is called once per distinct neighbour (in record order:
    it may number a rank on first sight), ``signal`` once per destination of a record's last
    row.  The rows are built as Python lists, written column by column."""
    if not ops:
        return IR.empty(0)
    columns = []  # (source views, destination views) of each record
    for o in ops:
        if len(o.src_idx) != len(o.s_addrs) or len(o.dst_idx) != len(o.d_addrs):
            raise LoweringError("enc_reduce_op_params: s_addrs/src_idx or d_addrs/dst_idx "
                                "differ in length")
        if o.reduce_size <= 0 or o.reduce_size % dsize:
            raise LoweringError(f"reduce_size {o.reduce_size} is not a positive number of "
                                f"{dsize}-byte elements")
        (s_views, s_elems), (d_views, d_elems) = _split(o.s_addrs), _split(o.d_addrs)
        e0 = s_elems[0]
        if s_elems.count(e0) != len(s_elems) or d_elems.count(e0) != len(d_elems):
            raise LoweringError("the leg IR reduces one element range: every source and "
                                "destination of a record must be at the same element")
        columns.append((list(s_views), list(d_views)))
    if any(len(o.s_addrs) > IR.MAX_SRC and len(o.d_addrs) != 1 for o in ops):
        raise LoweringError("a reduce with more sources than a leg holds needs exactly one "
                            "destination to chain through")
    if any(len(o.d_addrs) > IR.MAX_DST for o in ops):
        raise LoweringError(f"a reduce with more than {IR.MAX_DST} destinations")
    peer_of: dict[int, dict[int, int]] = {src_grp: {}, dst_grp: {}}  # group: idx -> peer

    def peers_of(grp: int, idxs: list[int]) -> list[int]:
        """The peer indexes of neighbours ``idxs`` of group ``grp`` (numbered on first sight)."""
        known = peer_of[grp]
        for idx in dict.fromkeys(idxs):
            if idx not in known:
                known[idx] = peer_index(ngroups.rank(grp, idx))
        return [known[idx] for idx in idxs]

    starts, stops, n_src, n_dst, rtype, n_inc = [], [], [], [], [], []
    src = ([], [], [], [])  # cells: row, slot, view, peer
    dst = ([], [], [], [])
    inc = ([], [], [], [])  # cells: row, slot, peer, semaphore
    for o, (s_views, d_views) in zip(ops, columns):
        a = o.s_addrs[0].elem
        b = a + o.reduce_size // dsize
        s_peers = peers_of(src_grp, o.src_idx)
        d_peers = peers_of(dst_grp, o.dst_idx)
        # sources of row k: k == 0: s[0 : MAX_SRC]; k > 0: dst + s[MAX_SRC + (k-1)(MAX_SRC-1) :]
        pieces = [(s_views[:IR.MAX_SRC], s_peers[:IR.MAX_SRC])]
        for pos in chain_starts(len(s_views)):
            end = pos + IR.MAX_SRC - 1
            pieces.append(([d_views[0]] + s_views[pos:end], [d_peers[0]] + s_peers[pos:end]))
        for j, (views, peers) in enumerate(pieces):
            row = len(starts)
            starts.append(a)
            stops.append(b)
            n_src.append(len(views))
            for cells, v, p in ((src, views, peers), (dst, d_views, d_peers)):
                cells[0].extend([row] * len(v))
                cells[1].extend(range(len(v)))
                cells[2].extend(v)
                cells[3].extend(p)
            n_dst.append(len(d_views))
            rtype.append(int(ReductionType.RING_2R1W if len(views) == 2
                             else ReductionType.KANGARING_NR1W))
            q = 0
            if signal is not None and j == len(pieces) - 1:
                for p, idx in zip(d_peers, o.dst_idx):
                    sem = signal(ngroups.rank(dst_grp, idx))
                    if sem is not None:
                        for col, x in zip(inc, (row, q, p, sem)):
                            col.append(x)
                        q += 1
            n_inc.append(q)
    rows = _rows(len(starts), spec)
    rows["start"] = starts
    rows["stop"] = stops
    rows["reduce"] = 1
    rows["n_src"] = n_src
    _put(rows, src[0], src[1], src_view=src[2], src_peer=src[3])
    rows["n_dst"] = n_dst
    _put(rows, dst[0], dst[1], dst_view=dst[2], dst_peer=dst[3])
    rows["reduction_type"] = rtype
    rows["n_inc"] = n_inc
    _put(rows, inc[0], inc[1], inc_peer=inc[2], inc_sem=inc[3], inc_val=[1] * len(inc[0]))
    if spec.waits:  # (fresh rows wait on nothing)
        set_waits(rows[0], spec.waits)
    return rows


def sync_rows(spec: RowSpec, incs: Sequence[tuple[int, int]] = (),
              waits: Sequence[tuple[int, int]] = ()) -> np.ndarray:
    """Data-less rows: increments ``(peer index, semaphore)`` (value 1, at most MAX_INC per
    row) and then, on a last row, waits ``(semaphore, value)``."""
    incs = list(incs)
    n_inc = [min(IR.MAX_INC, len(incs) - i) for i in range(0, len(incs), IR.MAX_INC)]
    waits = [(s, v) for s, v in waits if v > 0]
    rows = _rows(len(n_inc) + (1 if waits else 0), spec)
    rows["keep"] = 1
    if incs:
        rows["n_inc"][:len(n_inc)] = n_inc
        q = range(len(incs))
        _put(rows, [i // IR.MAX_INC for i in q], [i % IR.MAX_INC for i in q],
             inc_peer=[p for p, _s in incs], inc_sem=[s for _p, s in incs],
             inc_val=[1] * len(incs))
    if waits:
        set_waits(rows[-1], waits)
    return rows


def recv_rows(spec: RowSpec, recvs: Sequence[tuple[int, int, int, int, int]]) -> np.ndarray:
    """post_recv rows: ``(start, stop, sender peer index, landing view, semaphore)`` of each
    transfer that arrives through the net proxy (no data, no waits: they only record the
    receive FIFO entries and the semaphore the proxy increments)."""
    rows = _rows(len(recvs), spec)
    if recvs:
        for f, column in zip(("start", "stop", "net_src_peer", "net_view", "net_sem"),
                             zip(*recvs)):
            rows[f] = column
    return rows
