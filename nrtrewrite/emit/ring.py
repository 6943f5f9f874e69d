"""EMIT + COMPLETE for the ring family: composed steps -> legs, BDs, CCE, semaphores, FIFOs.

One call of :func:`emit_entry` turns the composed steps of every channel of one
SPAD entry on one rank into records appended to a :class:`RankBuilder`.
Everything is vectorised over the entry's legs with numpy; nothing is built
one Python object per descriptor.

A *leg* is one leaf call (one half-chunk of one ring step).  Its data moves as
*tiles* (one packet each: seed 000 §3.4); each tile has one stream per source
(M2S BDs) and one per destination (S2M BDs), a BD per contiguous run; a reduce
tile also has one CCE descriptor per source.  Semaphores (seed 000 §4.1-4.2):

* every leg that consumes its predecessor's data first does
  ``wait_ge_and_dec(recv_sema, 1)`` (subop 20);
* every leg ends with ``inc(dma_compl_sema)`` on its own core (LOCAL: source
  release) and, when it sends, ``inc(recv_sema)`` on the successor routed by its
  device id (REMOTE: data ready) or, across the network, ``inc(send_sema)`` on
  its own core for the net proxy;
* the channel closes with a ``mark_end`` leg: ``wait_ge_and_dec(dma_compl_sema,
  <number of legs>)`` - the counted barrier that also returns it to zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nrtrewrite.codes import (
    DType, EdgeLocality, EncdNeigh, EvtSemSubop, NetAddrMark, Opcode, SdmaOp, SDMA_DATA_TYPE_SIZE,
)
from nrtrewrite.compose.leaves import LEAF_SPECS, Buf, Leaf, Owner
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import (
    EVT_SEM_DEC, EVT_SEM_INC, SEM_COMPL, SEM_RECV, SEM_SEND, MemoryMap, channel_sem, route,
    sema_address,
)
from nrtrewrite.emit.buffers import BufferView
from nrtrewrite.emit.tiling import cce_dtype_nibbles, io_code, tile_elements
from nrtrewrite.errors import LimitError

MAX_SLOTS = 4  # sources + destinations of one leaf
N_LEAF = 16

# Per-leaf lookup tables (indexed by Leaf value) built once from LEAF_SPECS.
_SRC_N = np.zeros(N_LEAF, np.int64)
_DST_N = np.zeros(N_LEAF, np.int64)
_REDUCE = np.zeros(N_LEAF, bool)
_WAITS = np.zeros(N_LEAF, bool)
_SENDS = np.zeros(N_LEAF, bool)
#: buffer code of slot s of a leaf: buf * 2 + owner, -1 when unused.
_SLOT_BUF = np.full((N_LEAF, MAX_SLOTS), -1, np.int64)
for _leaf, _spec in LEAF_SPECS.items():
    _SRC_N[_leaf] = len(_spec.sources)
    _DST_N[_leaf] = len(_spec.dests)
    _REDUCE[_leaf] = _spec.reduce
    _WAITS[_leaf] = _spec.waits
    _SENDS[_leaf] = _spec.sends
    for _i, _buf in enumerate(_spec.sources):
        _SLOT_BUF[_leaf, _i] = int(_buf) * 2 + int(Owner.SELF)
    for _j, (_buf, _own) in enumerate(_spec.dests):
        _SLOT_BUF[_leaf, len(_spec.sources) + _j] = int(_buf) * 2 + int(_own)

#: The buffer a consuming leaf finds its predecessor's data in (for rx FIFO entries).
_RECV_BUF = {Leaf.recv_reduce_send: Buf.RECV, Leaf.recv_reduce_copy: Buf.RECV,
             Leaf.recv_reduce_copy_send: Buf.RECV, Leaf.direct_recv_send: Buf.OUT,
             Leaf.direct_recv: Buf.OUT}

SEM_ROLE_RECV, SEM_ROLE_SEND, SEM_ROLE_COMPL = 0, 1, 3


@dataclass(frozen=True)
class Peer:
    rank: int
    device: int
    logical_core: int  # index of the core on its device (TOP_SP / window)
    node: int


@dataclass
class ChannelState:
    """Running per-channel counters of one rank across the whole program."""

    bd_count: int = 0  # data BDs queued so far (generation tag)
    sem_count: int = 0  # semaphore BDs queued so far
    ops: list = field(default_factory=list)  # net_ops_info records
    src: list = field(default_factory=list)  # net_src_addr arrays
    dest: list = field(default_factory=list)  # net_dest_addr arrays


@dataclass
class EntryContext:
    """Everything :func:`emit_channel` needs about one SPAD entry on one rank."""

    rank: int
    trigger: int
    spad_index: int
    dtype: DType
    cce_op: int  # SDMA_CCETYPE (0 for copies)
    reduction_type: int  # reduction_type_t of the reduce legs
    views: dict[Buf, BufferView]
    me: Peer
    lnc_fmt: int
    num_active_channels: int
    subgraph_index: int
    groups: int  # pgta, recorded as unrolled_count
    reverse: bool = False  # unused by the ring (kept for later composers)


class RankBuilder:
    """Accumulates every artifact of one rank as lists of numpy arrays."""

    def __init__(self, rank: int):
        self.rank = rank
        self.parts: dict[str, list[np.ndarray]] = {name: [] for name in F.ARTIFACTS}
        self.counts: dict[str, int] = {name: 0 for name in F.ARTIFACTS}
        self.channels: dict[int, ChannelState] = {}
        self.tpinc_by_entry: dict[tuple[int, int], np.ndarray] = {}

    def state(self, channel: int) -> ChannelState:
        return self.channels.setdefault(channel, ChannelState())

    def append(self, name: str, arr: np.ndarray) -> int:
        first = self.counts[name]
        if arr.size:
            self.parts[name].append(arr)
            self.counts[name] += arr.size
        return first

    def finish(self) -> dict[str, list[np.ndarray]]:
        """Every artifact file as its list of record arrays, in file order (FIFOs channel-major).

        The parts are written one after the other (never concatenated: no extra copy)."""
        for ch in sorted(self.channels):
            st = self.channels[ch]
            for name, recs in (("net_ops.bin", st.ops), ("net_src.bin", st.src),
                               ("net_dest.bin", st.dest)):
                for arr in recs:
                    self.append(name, arr)
        return {name: list(self.parts[name]) for name in F.ARTIFACTS}

    def fifo_index(self) -> list[dict]:
        """Per-channel (first, count) slices of the FIFO files, in file order."""
        index = []
        first = {"ops": 0, "src": 0, "dest": 0}
        for ch in sorted(self.channels):
            st = self.channels[ch]
            n = {"ops": sum(a.size for a in st.ops), "src": sum(a.size for a in st.src),
                 "dest": sum(a.size for a in st.dest)}
            if not any(n.values()):
                continue
            index.append({"channel": ch, **{k: [first[k], n[k]] for k in n}})
            for k in n:
                first[k] += n[k]
        return index


def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner index, index within owner, first position of each owner) for repeat counts."""
    counts = np.asarray(counts, dtype=np.int64)
    first = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    within = np.arange(owner.size, dtype=np.int64) - first[owner] if owner.size else owner
    return owner, within, first


def _sema_addr(sp: int, sem: int, window: int) -> int:
    return sema_address(sp, sem, window)


@dataclass(frozen=True)
class ChannelPlan:
    """One channel of one entry: its composed steps and its neighbours."""

    channel: int
    steps: np.ndarray  # STEP_DTYPE, program order
    nxt: Peer
    prv: Peer
    next_locality: EdgeLocality
    prev_locality: EdgeLocality


def emit_entry(b: RankBuilder, ctx: EntryContext, chans: list[ChannelPlan]) -> dict:
    """Emit every channel of one SPAD entry, vectorised over all its legs.

    Returns ``{"legs": n, "bds": n, "tx": {channel: entries}, "rx": {...}}``.
    """
    nch = len(chans)
    dsize = ctx.views[Buf.IN].dsize
    sp = ctx.me.logical_core
    ch_ids = np.array([c.channel for c in chans], np.int64)
    net_next_c = np.array([c.next_locality == EdgeLocality.NETWORK for c in chans], bool)
    recv_sem_c = np.array([channel_sem(c, SEM_RECV) for c in ch_ids], np.int64)
    send_sem_c = np.array([channel_sem(c, SEM_SEND) for c in ch_ids], np.int64)
    compl_sem_c = np.array([channel_sem(c, SEM_COMPL) for c in ch_ids], np.int64)
    next_core_c = np.array([b_core(c.nxt) for c in chans], np.int64)
    next_route_c = np.array([_route_bits(c.nxt.device, ctx.me.device) for c in chans], np.int64)

    # ---- legs: every channel's non-empty steps, then its mark_end -----------------------
    kept = [c.steps[c.steps["stop"] > c.steps["start"]] for c in chans]
    n_c = np.array([k.size for k in kept], np.int64)  # legs per channel without mark_end
    total_c = n_c + 1
    cat = lambda field, end: np.concatenate(  # noqa: E731
        [np.append(k[field].astype(np.int64), end) for k in kept]) if chans else \
        np.zeros(0, np.int64)
    leaf = cat("leaf", int(Leaf.mark_end))
    start = cat("start", 0)
    stop = cat("stop", 0)
    half = cat("half", 0)
    tstep = cat("step", 0)
    tgroup = cat("group", 0)
    n = leaf.size
    leg_ci = np.repeat(np.arange(nch, dtype=np.int64), total_c)
    leg_first_c = np.cumsum(total_c) - total_c
    is_end = leaf == int(Leaf.mark_end)
    length = stop - start
    s_n, d_n = _SRC_N[leaf], _DST_N[leaf]
    reduce, waits, sends = _REDUCE[leaf], _WAITS[leaf], _SENDS[leaf]
    leg_net_next = net_next_c[leg_ci]

    # ---- tiles ---------------------------------------------------------------------------
    per_tile = tile_elements(dsize, np.maximum(length, 1), reduce)
    n_tiles = np.where(d_n > 0, -(-length // per_tile), 0)
    tile_leg, tile_k, _ = _expand(n_tiles)
    ta = start[tile_leg] + tile_k * per_tile[tile_leg]
    tb = np.minimum(ta + per_tile[tile_leg], stop[tile_leg])

    # ---- streams (one per source / destination of each tile) -------------------------------
    sd = (s_n + d_n)[tile_leg]
    si_tile, si_slot, _ = _expand(sd)
    si_leg = tile_leg[si_tile]
    si_code = _SLOT_BUF[leaf[si_leg], si_slot]
    # a destination on a successor across the network becomes our gateway staging buffer
    to_gw = leg_net_next[si_leg] & (si_code % 2 == int(Owner.NEXT))
    si_code = np.where(to_gw, int(Buf.GW) * 2 + int(Owner.SELF), si_code)
    si_a, si_b = ta[si_tile], tb[si_tile]
    codes = sorted({int(_SLOT_BUF[lf, sl]) for lf in np.unique(leaf) for sl in range(MAX_SLOTS)
                    if _SLOT_BUF[lf, sl] >= 0} | ({int(Buf.GW) * 2} if net_next_c.any() else set()))
    all_linear = all(ctx.views[Buf(c // 2)].linear for c in codes)
    if all_linear:  # DRAM only: one BD per stream
        bd_stream = np.arange(si_code.size, dtype=np.int64)
        bd_addr = np.zeros(si_code.size, np.int64)
        for code in codes:
            sel = np.nonzero(si_code == code)[0]
            if sel.size:
                bd_addr[sel] = ctx.views[Buf(code // 2)].address(si_a[sel])
        bd_len = (si_b - si_a) * dsize
    else:
        run_count = np.zeros(si_code.size, np.int64)
        found = []
        for code in codes:
            sel = np.nonzero(si_code == code)[0]
            if not sel.size:
                continue
            owner_idx, addr, nbytes = ctx.views[Buf(code // 2)].runs(si_a[sel], si_b[sel])
            run_count[sel] = np.bincount(owner_idx, minlength=sel.size)
            found.append((sel, owner_idx, addr, nbytes))
        run_first = np.cumsum(run_count) - run_count
        total = int(run_count.sum())
        bd_addr = np.zeros(total, np.int64)
        bd_len = np.zeros(total, np.int64)
        bd_stream = np.zeros(total, np.int64)
        for sel, owner_idx, addr, nbytes in found:
            _o, within, _f = _expand(run_count[sel])
            pos = run_first[sel][owner_idx] + within
            bd_addr[pos] = addr
            bd_len[pos] = nbytes
            bd_stream[pos] = sel[owner_idx]
    total_bd = bd_addr.size
    bd_si_code = si_code[bd_stream]
    bd_leg = si_leg[bd_stream]
    bd_ci = leg_ci[bd_leg]
    next_owned = bd_si_code % 2 == int(Owner.NEXT)
    bd_addr = np.where(next_owned, (bd_addr + next_core_c[bd_ci]) | next_route_c[bd_ci],
                       bd_addr + b_core(ctx.me))
    if total_bd and bd_len.max() > F.BD_MAX_BYTES:
        raise LimitError(f"a BD of {int(bd_len.max())} bytes exceeds {F.BD_MAX_BYTES}")
    bd_slot = si_slot[bd_stream]
    bd_tile = si_tile[bd_stream]
    is_src = bd_slot < s_n[bd_leg]
    stream_index = np.where(is_src, bd_slot, bd_slot - s_n[bd_leg])
    tile_bd_count = np.bincount(bd_tile, minlength=tile_leg.size)
    tile_bd_first = np.cumsum(tile_bd_count) - tile_bd_count
    bd_pos_in_tile = np.arange(total_bd, dtype=np.int64) - tile_bd_first[bd_tile]
    # generation tag: position of the BD among this rank's data BDs of its channel
    leg_bd_count = np.bincount(bd_leg, minlength=n)
    ch_bd_count = np.bincount(leg_ci, weights=leg_bd_count, minlength=nch).astype(np.int64)
    ch_bd_first = np.cumsum(ch_bd_count) - ch_bd_count
    base = np.array([b.state(int(c)).bd_count for c in ch_ids], np.int64)
    gen = ((base[bd_ci] + np.arange(total_bd, dtype=np.int64) - ch_bd_first[bd_ci])
           // F.BD_RING_ENTRIES) & F.GEN_MASK
    sdma_op_leg = np.where(reduce, int(SdmaOp.CCE), np.where(d_n > 0, int(SdmaOp.CME), 0))
    bds = np.empty(total_bd, F.BD_DTYPE)
    bds["len_ctrl"] = ((bd_len & F.LEN_MASK) | (gen << F.GEN_SHIFT)
                       | np.where(bd_pos_in_tile == 0, F.LEN_FIRST, 0)
                       | np.where(bd_pos_in_tile == tile_bd_count[bd_tile] - 1, F.LEN_LAST, 0))
    bds["meta_ctrl"] = (sdma_op_leg[bd_leg] | np.where(is_src, 0, F.META_DIR_S2M)
                        | (stream_index << F.META_STREAM_SHIFT))
    bds["buf_ptr"] = bd_addr
    for i, c in enumerate(ch_ids):
        b.state(int(c)).bd_count += int(ch_bd_count[i])
    dma_first_all = b.append("dma.bin", bds)

    # ---- CCE descriptors (one per source per reduce tile) ---------------------------------
    cce_per_tile = np.where(reduce[tile_leg], s_n[tile_leg], 0)
    c_tile, c_src, _ = _expand(cce_per_tile)
    cce = np.empty(c_tile.size, F.CCE_DTYPE)
    if c_tile.size:
        in_dt, out_dt, acc_dt = cce_dtype_nibbles(ctx.dtype)
        n_src = s_n[tile_leg[c_tile]]
        cce["w0"] = F.CCE_W0_META | (c_src << 24)
        cce["w1"] = ((ctx.cce_op & 7) | np.where(c_src == n_src - 1, F.CCE_LAST, 0)
                     | (in_dt << 8) | (out_dt << 12) | (acc_dt << 16) | F.CCE_VALID)
        cce["w2"] = ((tb - ta)[c_tile] * dsize) & 0xFFFFFF
        cce["w3"] = n_src | (ctx.reduction_type << 8)
    cce_first_all = b.append("cce.bin", cce)
    leg_cce = np.bincount(tile_leg[c_tile], minlength=n) if c_tile.size else np.zeros(n, np.int64)

    # ---- semaphore BDs: the wait, then the increments (mark_end: the completion wait) -------
    n_sem = np.where(is_end, 1, waits.astype(np.int64) + 1 + sends.astype(np.int64))
    s_leg, s_k, s_first = _expand(n_sem)
    s_ci = leg_ci[s_leg]
    s_end = is_end[s_leg]
    s_wait = (s_k == 0) & waits[s_leg]
    k_inc = s_k - waits[s_leg]  # 0 = dma_compl inc, 1 = the send inc
    recv_dec = np.array([_sema_addr(sp, int(x), EVT_SEM_DEC) for x in recv_sem_c], np.int64)
    compl_inc = np.array([_sema_addr(sp, int(x), EVT_SEM_INC) for x in compl_sem_c], np.int64)
    compl_dec = np.array([_sema_addr(sp, int(x), EVT_SEM_DEC) for x in compl_sem_c], np.int64)
    send_inc = np.array([
        _sema_addr(sp, int(send_sem_c[i]), EVT_SEM_INC) if net_next_c[i] else
        _sema_addr(c.nxt.logical_core, int(recv_sem_c[i]), EVT_SEM_INC)
        | _route_bits(c.nxt.device, ctx.me.device) for i, c in enumerate(chans)], np.int64)
    send_role = np.where(net_next_c, SEM_ROLE_SEND, SEM_ROLE_RECV)
    send_remote = np.where(net_next_c, 0, F.SEM_REMOTE)
    is_send_inc = ~s_end & ~s_wait & (k_inc == 1)
    subop = np.where(s_end | s_wait, int(EvtSemSubop.WAIT_GE_AND_DEC), int(EvtSemSubop.INC))
    role = np.where(s_end, SEM_ROLE_COMPL, np.where(s_wait, SEM_ROLE_RECV,
                                                     np.where(is_send_inc, send_role[s_ci],
                                                              SEM_ROLE_COMPL)))
    ch_sem_count = np.bincount(s_ci, minlength=nch)
    ch_sem_first = np.cumsum(ch_sem_count) - ch_sem_count
    sbase = np.array([b.state(int(c)).sem_count for c in ch_ids], np.int64)
    sgen = ((sbase[s_ci] + np.arange(s_leg.size, dtype=np.int64) - ch_sem_first[s_ci])
            // F.BD_RING_ENTRIES) & F.GEN_MASK
    sems = np.empty(s_leg.size, F.SEM_DTYPE)
    sems["ctrl"] = (subop | (role << F.SEM_ROLE_SHIFT)
                    | np.where(is_send_inc, send_remote[s_ci], 0) | (sgen << F.GEN_SHIFT))
    sems["value"] = np.where(s_end, n_c[s_ci], 1)
    sems["addr"] = np.where(s_end, compl_dec[s_ci],
                            np.where(s_wait, recv_dec[s_ci],
                                     np.where(is_send_inc, send_inc[s_ci], compl_inc[s_ci])))
    for i, c in enumerate(ch_ids):
        b.state(int(c)).sem_count += int(ch_sem_count[i])
    sem_first_all = b.append("sem.bin", sems)

    # ---- 0xBF words: per data leg, pieces of <= 256 elements per dimension ---------------------
    cap2 = F.T3D_DIM_CAP * F.T3D_DIM_CAP
    full, q, r = length // cap2, (length // F.T3D_DIM_CAP) % F.T3D_DIM_CAP, length % F.T3D_DIM_CAP
    pieces = np.where(d_n > 0, full + (q > 0) + (r > 0), 0)
    p_leg, p_k, p_first = _expand(pieces)
    kind = np.where(p_k < full[p_leg], 0, np.where((p_k == full[p_leg]) & (q[p_leg] > 0), 1, 2))
    n0 = np.where(kind == 2, r[p_leg], F.T3D_DIM_CAP)
    n1 = np.where(kind == 0, F.T3D_DIM_CAP, np.where(kind == 1, q[p_leg], 1))
    piece_off = np.where(kind == 2, length[p_leg] - r[p_leg], p_k * cap2)
    p_ci = leg_ci[p_leg]
    first_piece, last_piece = p_k == 0, p_k == pieces[p_leg] - 1
    pw = first_piece & waits[p_leg]
    words = np.zeros(p_leg.size, F.SB2SB_DTYPE)
    words["opcode"] = int(Opcode.SB2SB_COLLECTIVE)
    words["inst_word_len"] = 16
    words["wait_mode"] = np.where(pw, int(EvtSemSubop.WAIT_GE_AND_DEC), 0)
    words["wait_idx"] = np.where(pw, recv_sem_c[p_ci], 0)
    words["semaphore_value"] = np.where(pw, 1, 0)
    words["update_mode"] = np.where(last_piece, int(EvtSemSubop.INC), 0)
    words["update_idx"] = np.where(last_piece, compl_sem_c[p_ci], 0)
    words["in_dtype"] = words["out_dtype"] = io_code(ctx.dtype)
    elem0 = start[p_leg] + piece_off
    p_leaf = leaf[p_leg]
    for part, slot in (("src", np.zeros_like(p_leg)), ("dst", s_n[p_leg])):
        code = _SLOT_BUF[p_leaf, slot]
        start_addr = np.zeros(p_leg.size, np.int64)
        for c in np.unique(code):
            sel = code == c
            view = ctx.views[Buf(int(c) // 2)]
            start_addr[sel] = view.address(elem0[sel]) - view.anchor
        if p_leg.size and ((start_addr < 0).any() or (start_addr > 0xFFFFFFFF).any()):
            raise LimitError("a leg's start offset does not fit the 32-bit TENSOR3D start_addr")
        words[part]["start_addr"] = start_addr
        words[part]["step_elem"][:, 0] = 1
        words[part]["step_elem"][:, 1] = F.T3D_DIM_CAP
        words[part]["num_elem"][:, 0] = n0
        words[part]["num_elem"][:, 1] = n1
        words[part]["num_elem"][:, 2] = 1
    words["lnc_size_fmt"] = ctx.lnc_fmt
    words["num_active_channels"] = ctx.num_active_channels
    sb_first_all = b.append("sb2sb.bin", words)

    # ---- leg records --------------------------------------------------------------------------
    legs = np.zeros(n, F.LEG_DTYPE)
    legs["trigger"] = ctx.trigger
    legs["spad_index"] = ctx.spad_index
    legs["channel"] = ch_ids[leg_ci]
    legs["sdma_op"] = sdma_op_leg
    legs["step"] = np.arange(n, dtype=np.int64) - leg_first_c[leg_ci]
    legs["leaf"] = leaf
    legs["half"] = half
    legs["reduction_type"] = np.where(reduce, ctx.reduction_type, F.NO_REDUCTION_TYPE)
    legs["neigh"] = np.where(sends, int(EncdNeigh.ENCD_NEIGH_NEXT),
                             np.where(waits & (d_n == 0), int(EncdNeigh.ENCD_NEIGH_PREV),
                                      int(EncdNeigh.ENCD_NEIGH_LOCAL)))
    legs["sb2sb_first"] = sb_first_all + p_first
    legs["sb2sb_count"] = pieces
    legs["n_tiles"] = n_tiles
    legs["dma_first"] = dma_first_all + np.cumsum(leg_bd_count) - leg_bd_count
    legs["dma_count"] = leg_bd_count
    legs["cce_first"] = cce_first_all + np.cumsum(leg_cce) - leg_cce
    legs["cce_count"] = leg_cce
    legs["sem_first"] = sem_first_all + s_first
    legs["sem_count"] = n_sem
    legs["elem_start"] = start
    legs["num_elements"] = length
    steps_per_group = np.array([int(k["step"].max()) + 1 if k.size else 0 for k in kept], np.int64)
    legs["ring_step"] = np.where(is_end, 0, tstep + tgroup * steps_per_group[leg_ci])
    b.append("legs.bin", legs)

    # ---- tp_inc_steps: M2S / S2M BDs per leg, run-length encoded per channel ---------------------
    m2s = np.bincount(bd_leg[is_src], minlength=n)
    s2m = leg_bd_count - m2s
    if n and (m2s.max() > 0xFFFE or s2m.max() > 0xFFFE):
        raise LimitError("a leg needs more than 65534 BDs in one tp_inc_steps record")
    change = np.ones(n, bool)
    change[1:] = (m2s[1:] != m2s[:-1]) | (s2m[1:] != s2m[:-1])
    change[leg_first_c] = True
    run_start = np.nonzero(change)[0]
    run_len = np.diff(np.append(run_start, n))
    r_idx, r_k, _ = _expand(-(-run_len // 0xFFFF))  # split runs longer than the u16 repeat
    tp = np.zeros(r_idx.size, F.TPINC_DTYPE)
    tp["m2s"] = m2s[run_start][r_idx]
    tp["s2m"] = s2m[run_start][r_idx]
    tp["repeat"] = np.minimum(run_len[r_idx] - r_k * 0xFFFF, 0xFFFF)
    tp_ci = leg_ci[run_start][r_idx]
    tp_last = np.append(tp_ci[1:] != tp_ci[:-1], True)
    tp["flags"] = np.where(tp_last, F.TPINC_LAST_SYNC, 0)
    bounds = np.nonzero(np.append(True, tp_ci[1:] != tp_ci[:-1]))[0]
    for i, part in zip(tp_ci[bounds], np.split(tp, bounds[1:])):
        b.tpinc_by_entry[(ctx.spad_index, int(ch_ids[i]))] = part

    # ---- net-proxy FIFOs (channels with a network neighbour only) --------------------------------
    tx: dict[int, int] = {}
    rx: dict[int, int] = {}
    for i, c in enumerate(chans):
        net_next = c.next_locality == EdgeLocality.NETWORK
        net_prev = c.prev_locality == EdgeLocality.NETWORK
        if not (net_next or net_prev):
            continue
        st = b.state(c.channel)
        legs_c = kept[i]
        lf = legs_c["leaf"].astype(np.int64)
        info = np.zeros(1, F.NET_OPS_INFO_DTYPE)
        info["inc_send_handshake"] = info["inc_send_complete"] = _sema_addr(
            sp, int(send_sem_c[i]), EVT_SEM_INC)
        info["inc_recv_handshake"] = info["inc_recv_complete"] = _sema_addr(
            sp, int(recv_sem_c[i]), EVT_SEM_INC)
        info["net_idx_loop_size"] = F.NET_INDEX_LOOP_SIZE
        info["initial_send_credits"] = F.NET_INITIAL_SEND_CREDITS
        info["ending_recv_credits"] = F.NET_ENDING_RECV_CREDITS
        info["data_type_sz"] = SDMA_DATA_TYPE_SIZE[ctx.dtype]
        info["basic_block_id"] = ctx.subgraph_index
        info["func_rel_op_idx"] = ctx.trigger
        info["unrolled_count"] = ctx.groups
        info["enc_channel"] = c.channel
        st.ops.append(info)
        op_idx = len(st.ops) - 1
        if net_next:
            tx[c.channel] = _net_tx(st, ctx, legs_c, _SENDS[lf], op_idx, c.nxt)
            info["tx_entry_cnt"] = tx[c.channel]
            st.src.append(_terminator(F.NET_SRC_ADDR_DTYPE, op_idx, "dst_rank"))
        if net_prev:
            rx[c.channel] = _net_rx(st, ctx, legs_c, _WAITS[lf], op_idx, c.prv)
            info["rx_entry_cnt"] = rx[c.channel]
            st.dest.append(_terminator(F.NET_DEST_ADDR_DTYPE, op_idx, "src_rank"))
    return {"legs": n, "bds": total_bd, "tx": tx, "rx": rx}


def b_core(peer: Peer) -> int:
    return MemoryMap.core_base(peer.logical_core)


def _route_bits(device: int, self_device: int) -> int:
    """Routing bits of a target on ``device`` seen from ``self_device`` (0 when local)."""
    return route(0, device, self_device)


def _gather(dtype: np.dtype, recs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """Merge (leg order key, records) groups into one array in key order.

    Works on the raw bytes: ``np.concatenate`` drops the padding of dtypes with explicit
    offsets, and fancy indexing of such arrays may leave their padding bytes undefined.
    """
    keys = np.concatenate([k for k, _ in recs])
    raw = np.zeros((keys.size, dtype.itemsize), np.uint8)  # whole records, padding included
    pos = 0
    for _k, r in recs:
        raw[pos:pos + r.size] = r.view(np.uint8).reshape(r.size, dtype.itemsize)
        pos += r.size
    return raw[np.argsort(keys, kind="stable")].view(dtype).reshape(-1)


def _terminator(dtype: np.dtype, op_idx: int, rank_field: str) -> np.ndarray:
    """proxy_end_operation's stop mark: net_op_idx = count-1, size 0, NET_OP_COMPLETE."""
    rec = np.zeros(1, dtype)
    rec["net_op_idx"] = op_idx
    rec["size"] = 0
    rec["mark"] = int(NetAddrMark.NET_OP_COMPLETE)
    rec[rank_field] = -1
    return rec


def _net_tx(st: ChannelState, ctx: EntryContext, legs_in: np.ndarray, sends: np.ndarray,
            op_idx: int, nxt: Peer) -> int:
    """__record_net_src_addr for every sending leg: GW runs paired with the receiver's runs."""
    sel = np.nonzero(sends)[0]
    if not sel.size:
        return 0
    leaf = legs_in["leaf"][sel].astype(np.int64)
    a = legs_in["start"][sel].astype(np.int64)
    bnd = legs_in["stop"][sel].astype(np.int64)
    # destination buffer on the successor: the NEXT-owned destination of the leaf
    dst_code = np.full(sel.size, -1, np.int64)
    for slot in range(MAX_SLOTS):
        c = _SLOT_BUF[leaf, slot]
        dst_code = np.where((dst_code < 0) & (c >= 0) & (c % 2 == int(Owner.NEXT)), c, dst_code)
    recs = []
    for code in np.unique(dst_code):
        m = np.nonzero(dst_code == code)[0]
        view = ctx.views[Buf(int(code) // 2)]
        owner, addr, nbytes = view.runs(a[m], bnd[m])
        # the sender's gateway copy of the same elements, run by run
        _o, within, first = _expand(np.bincount(owner, minlength=m.size))
        elem_off = np.zeros(owner.size, np.int64)
        run_elems = nbytes // view.dsize
        csum = np.cumsum(run_elems) - run_elems
        elem_off = csum - csum[first[owner]]
        gw = ctx.views[Buf.GW].address(a[m][owner] + elem_off)
        last = np.append(owner[1:] != owner[:-1], True)
        rec = np.zeros(owner.size, F.NET_SRC_ADDR_DTYPE)
        rec["net_op_idx"] = op_idx
        rec["complete"] = last.astype(np.int32)
        rec["dev_addr"] = (gw + b_core(ctx.me)).astype(np.uint64)
        rec["size"] = nbytes
        rec["mark"] = int(NetAddrMark.NET_TRANSFER)
        rec["dst_rank"] = nxt.rank
        rec["dst_addr"] = (addr + b_core(nxt)).astype(np.uint64)
        recs.append((m[owner], rec))
    allrec = _gather(F.NET_SRC_ADDR_DTYPE, recs)
    st.src.append(allrec)
    return int(allrec.size)


def _net_rx(st: ChannelState, ctx: EntryContext, legs_in: np.ndarray, waits: np.ndarray,
            op_idx: int, prv: Peer) -> int:
    """__record_net_dest_addr for every consuming leg: where the predecessor's bytes land."""
    sel = np.nonzero(waits)[0]
    if not sel.size:
        return 0
    leaf = legs_in["leaf"][sel].astype(np.int64)
    a = legs_in["start"][sel].astype(np.int64)
    bnd = legs_in["stop"][sel].astype(np.int64)
    buf = np.array([int(_RECV_BUF[Leaf(int(x))]) for x in leaf], np.int64)
    recs = []
    for code in np.unique(buf):
        m = np.nonzero(buf == code)[0]
        view = ctx.views[Buf(int(code))]
        owner, addr, nbytes = view.runs(a[m], bnd[m])
        last = np.append(owner[1:] != owner[:-1], True)
        rec = np.zeros(owner.size, F.NET_DEST_ADDR_DTYPE)
        rec["net_op_idx"] = op_idx
        rec["complete"] = last.astype(np.int32)
        rec["dev_addr"] = (addr + b_core(ctx.me)).astype(np.uint64)
        rec["size"] = nbytes
        rec["mark"] = int(NetAddrMark.NET_TRANSFER)
        rec["src_rank"] = prv.rank
        recs.append((m[owner], rec))
    allrec = _gather(F.NET_DEST_ADDR_DTYPE, recs)
    st.dest.append(allrec)
    return int(allrec.size)
