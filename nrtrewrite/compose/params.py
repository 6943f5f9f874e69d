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

@dataclass(frozen=True)
class TransactionInfo:
    """One input (or the output) transaction of a mesh reduce event: the buffer's first
    element, the neighbour it belongs to and the page table's DMA size (bytes per page)."""

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
    out: list[EncReduceOpParams] = []
    remaining, offset = total_size, 0
    while remaining > 0:
        op = EncReduceOpParams()
        dma_sz = 0
        for txn in in_txns:
            voff, dma_sz = get_pgt_offset(txn, offset, total_size)
            if not (dma_sz == remaining or dma_sz == txn.dma_size):
                raise LoweringError(f"page table of neighbour {txn.neighbor_idx}: DMA size "
                                    f"{dma_sz} is neither the remaining {remaining} bytes nor "
                                    f"a page ({txn.dma_size})")
            if voff % dsize:
                raise LoweringError("a page boundary splits an element")
            op.s_addrs.append(Addr(txn.base.view, txn.base.elem + voff // dsize))
            op.src_idx.append(txn.neighbor_idx)
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


def copy_rows(op: EncCopyOpParams, spec: RowSpec, dsize: int, src_peer: int,
              peer_index: Callable[[int], int], signal: Callable[[int], int | None], *,
              net_ranks: frozenset[int] = frozenset()) -> np.ndarray:
    """One enc_copy_op_params as IR rows: the destinations that are not skipped, grouped by
    element range (a leg moves one range), at most MAX_DST per row.  ``src_peer`` is the peer
    index of the source's owner (neighbour ``op.src_idx``), ``peer_index(rank)`` a rank's;
    ``signal(rank)`` the semaphore each destination rank gets one increment on (None: none).
    Vectorised over the destinations (``peer_index`` and ``signal`` are called in row order,
    destination by destination)."""
    check_copy_params(op, net_ranks=net_ranks)
    sizes = np.array(op.copy_sizes, np.int64)
    offs = np.array(op.s_offsets, np.int64)
    d = np.flatnonzero(~np.array(op.d_skip_copy, bool) & (sizes != 0))
    start = op.s_addr.elem + offs[d] // dsize
    d_elem = np.array([op.d_addrs[i].elem for i in d.tolist()], np.int64)
    bad_size = ((offs[d] % dsize) != 0) | ((sizes[d] % dsize) != 0)
    bad = np.flatnonzero(bad_size | (d_elem != start))
    if bad.size:
        i = int(bad[0])
        if bad_size[i]:
            raise LoweringError("a copy offset or size is not a whole number of elements")
        raise LoweringError(f"destination {int(d[i])}: the leg IR moves one element range, but "
                            f"the source is at element {int(start[i])} and the destination at "
                            f"{int(d_elem[i])}")
    stop = start + sizes[d] // dsize
    # rows: destinations grouped by element range in order of first appearance, MAX_DST a row
    ids: dict[tuple[int, int], int] = {}
    group = np.array([ids.setdefault(ab, len(ids)) for ab in zip(start.tolist(), stop.tolist())],
                     np.int64)
    order = np.argsort(group, kind="stable")
    d, start, stop, group = d[order], start[order], stop[order], group[order]
    g_first = np.searchsorted(group, group)  # first position of each destination's group
    within = np.arange(d.size) - g_first
    g_rows = -(-np.bincount(group) // IR.MAX_DST) if d.size else np.zeros(0, np.int64)
    row = (np.cumsum(g_rows) - g_rows)[group] + within // IR.MAX_DST
    j = within % IR.MAX_DST
    n_rows = int(g_rows.sum())
    rows = _rows(n_rows, spec)
    if not n_rows:
        return rows
    ranks = [op.d_ranks[i] for i in d.tolist()]
    peers, sems = [], []
    for r in ranks:
        peers.append(peer_index(r))
        sems.append(signal(r))
    peers = np.array(peers, np.int64)
    has = np.array([sm is not None for sm in sems], bool)
    sem = np.array([sm if sm is not None else 0 for sm in sems], np.int64)
    row_first = np.searchsorted(row, np.arange(n_rows))
    rows["start"] = start[row_first]
    rows["stop"] = stop[row_first]
    rows["n_src"] = 1
    rows["src_view"][:, 0] = op.s_addr.view
    rows["src_peer"][:, 0] = src_peer
    rows["n_dst"] = np.bincount(row, minlength=n_rows)
    rows["dst_view"][row, j] = [op.d_addrs[i].view for i in d.tolist()]
    rows["dst_peer"][row, j] = peers
    # increments: the destinations with a semaphore, in destination order, packed per row
    csum = np.cumsum(has)
    k = csum - 1 - (csum - has)[row_first][row]
    rows["n_inc"] = np.bincount(row[has], minlength=n_rows)
    rows["inc_peer"][row[has], k[has]] = peers[has]
    rows["inc_sem"][row[has], k[has]] = sem[has]
    rows["inc_val"][row[has], k[has]] = 1
    set_waits(rows[0], spec.waits)
    return rows


def reduce_rows(ops: Sequence[EncReduceOpParams], spec: RowSpec, dsize: int,
                ngroups: NeighborGroups, src_grp: int, dst_grp: int,
                peer_index: Callable[[int], int], signal: Callable[[int], int | None] | None = None
                ) -> np.ndarray:
    """enc_reduce_op_params records as CCE reduce rows.

    A record with more sources than a leg holds (MAX_SRC) becomes a chain over its single
    destination: the first row reduces MAX_SRC sources into it, each next row reduces it with
    the next MAX_SRC - 1 sources (NR1W; every partial is rounded once to the I/O dtype).  A
    two-source row is the ring's 2-reader/1-writer shape (RING_2R1W), a wider one
    KANGARING_NR1W.  Vectorised over the records."""
    if not ops:
        return IR.empty(0)
    ns = np.array([len(o.s_addrs) for o in ops], np.int64)
    nd = np.array([len(o.d_addrs) for o in ops], np.int64)
    for o in ops:
        if len(o.src_idx) != len(o.s_addrs) or len(o.dst_idx) != len(o.d_addrs):
            raise LoweringError("enc_reduce_op_params: s_addrs/src_idx or d_addrs/dst_idx "
                                "differ in length")
        if o.reduce_size <= 0 or o.reduce_size % dsize:
            raise LoweringError(f"reduce_size {o.reduce_size} is not a positive number of "
                                f"{dsize}-byte elements")
        for a in o.s_addrs[1:] + o.d_addrs:
            if a.elem != o.s_addrs[0].elem:
                raise LoweringError("the leg IR reduces one element range: every source and "
                                    "destination of a record must be at the same element")
    if np.any((ns > IR.MAX_SRC) & (nd != 1)):
        raise LoweringError("a reduce with more sources than a leg holds needs exactly one "
                            "destination to chain through")
    if np.any(nd > IR.MAX_DST):
        raise LoweringError(f"a reduce with more than {IR.MAX_DST} destinations")
    # chain lengths: ceil((ns - MAX_SRC) / (MAX_SRC - 1)) + 1 rows per record
    extra = np.maximum(ns - IR.MAX_SRC, 0)
    nrows = 1 + -(-extra // (IR.MAX_SRC - 1))
    total = int(nrows.sum())
    rows = _rows(total, spec)
    rec = np.repeat(np.arange(len(ops)), nrows)
    first_row = np.cumsum(nrows) - nrows
    start = np.array([o.s_addrs[0].elem for o in ops], np.int64)
    size = np.array([o.reduce_size // dsize for o in ops], np.int64)
    rows["start"] = start[rec]
    rows["stop"] = (start + size)[rec]
    rows["reduce"] = 1
    # sources of row k: k == 0: s[0 : MAX_SRC]; k > 0: dst + s[MAX_SRC + (k-1)(MAX_SRC-1) : ...]
    for i, o in enumerate(ops):
        src = [(a.view, peer_index(ngroups.rank(src_grp, idx))) for a, idx in
               zip(o.s_addrs, o.src_idx)]
        dst = [(a.view, peer_index(ngroups.rank(dst_grp, idx))) for a, idx in
               zip(o.d_addrs, o.dst_idx)]
        first = int(first_row[i])
        pieces = [src[:IR.MAX_SRC]]
        pos = IR.MAX_SRC
        while pos < len(src):
            pieces.append([dst[0]] + src[pos:pos + IR.MAX_SRC - 1])
            pos += IR.MAX_SRC - 1
        for j, piece in enumerate(pieces):
            r = rows[first + j]
            r["n_src"] = len(piece)
            for s_i, (v, p) in enumerate(piece):
                r["src_view"][s_i], r["src_peer"][s_i] = v, p
            r["n_dst"] = len(dst)
            for d_i, (v, p) in enumerate(dst):
                r["dst_view"][d_i], r["dst_peer"][d_i] = v, p
            r["reduction_type"] = int(ReductionType.RING_2R1W if len(piece) == 2
                                      else ReductionType.KANGARING_NR1W)
            if signal is not None and j == len(pieces) - 1:
                incs = [(p, signal(ngroups.rank(dst_grp, idx)))
                        for (_v, p), idx in zip(dst, o.dst_idx)]
                incs = [(p, s) for p, s in incs if s is not None]
                r["n_inc"] = len(incs)
                for q, (p, s) in enumerate(incs):
                    r["inc_peer"][q], r["inc_sem"][q], r["inc_val"][q] = p, s, 1
    set_waits(rows[0], spec.waits)
    return rows


def sync_rows(spec: RowSpec, incs: Sequence[tuple[int, int]] = (),
              waits: Sequence[tuple[int, int]] = ()) -> np.ndarray:
    """Data-less rows: increments ``(peer index, semaphore)`` (value 1, at most MAX_INC per
    row) and then, on a last row, waits ``(semaphore, value)``."""
    incs = list(incs)
    chunks = [incs[i:i + IR.MAX_INC] for i in range(0, len(incs), IR.MAX_INC)]
    waits = [(s, v) for s, v in waits if v > 0]
    n = len(chunks) + (1 if waits else 0)
    rows = _rows(n, spec)
    rows["keep"] = 1
    for r, ch in zip(rows, chunks):
        r["n_inc"] = len(ch)
        for q, (p, s) in enumerate(ch):
            r["inc_peer"][q], r["inc_sem"][q], r["inc_val"][q] = p, s, 1
    if waits:
        set_waits(rows[-1], waits)
    return rows


def recv_rows(spec: RowSpec, recvs: Sequence[tuple[int, int, int, int, int]]) -> np.ndarray:
    """post_recv rows: ``(start, stop, sender peer index, landing view, semaphore)`` of each
    transfer that arrives through the net proxy (no data, no waits: they only record the
    receive FIFO entries and the semaphore the proxy increments)."""
    rows = _rows(len(recvs), spec)
    for r, (a, b, peer, view, sem) in zip(rows, recvs):
        r["start"], r["stop"] = a, b
        r["net_src_peer"] = peer
        r["net_view"] = view
        r["net_sem"] = sem
    return rows
