"""EMIT + COMPLETE for the ring family: composed steps -> legs, BDs, CCE, semaphores, FIFOs.

One call of :func:`emit_channel` turns the composed steps of one channel of one
SPAD entry on one rank into records appended to a :class:`RankBuilder`.
Everything is vectorised over the channel's legs with numpy; nothing is built
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
    EdgeLocality, EncdNeigh, EvtSemSubop, NetAddrMark, SdmaOp, SDMA_DATA_TYPE_SIZE, DType,
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

    def finish(self) -> dict[str, bytes]:
        """The bytes of every artifact file (FIFOs channel-major) and the FIFO slice index."""
        for ch in sorted(self.channels):
            st = self.channels[ch]
            for name, recs in (("net_ops.bin", st.ops), ("net_src.bin", st.src),
                               ("net_dest.bin", st.dest)):
                for arr in recs:
                    self.append(name, arr)
        out = {}
        for name, (dtype, _struct) in F.ARTIFACTS.items():
            parts = self.parts[name]
            out[name] = np.concatenate(parts).tobytes() if parts else b""
        return out

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


def emit_channel(b: RankBuilder, ctx: EntryContext, channel: int, steps: np.ndarray,
                 nxt: Peer, prv: Peer, next_locality: EdgeLocality,
                 prev_locality: EdgeLocality, step_base: int = 0) -> dict:
    """Emit one channel of one entry.  Returns a small summary (legs, net tx/rx)."""
    st = b.state(channel)
    legs_in = steps[steps["stop"] > steps["start"]]
    n = legs_in.size
    leaf = legs_in["leaf"].astype(np.int64)
    start = legs_in["start"].astype(np.int64)
    stop = legs_in["stop"].astype(np.int64)
    length = stop - start
    s_n, d_n = _SRC_N[leaf], _DST_N[leaf]
    reduce, waits, sends = _REDUCE[leaf], _WAITS[leaf], _SENDS[leaf]
    dsize = ctx.views[Buf.IN].dsize
    net_next = next_locality == EdgeLocality.NETWORK
    net_prev = prev_locality == EdgeLocality.NETWORK
    recv_sem = channel_sem(channel, SEM_RECV)
    send_sem = channel_sem(channel, SEM_SEND)
    compl_sem = channel_sem(channel, SEM_COMPL)
    sp = ctx.me.logical_core

    # ---- tiles -------------------------------------------------------------
    per_tile = tile_elements(dsize, length, reduce)
    n_tiles = np.where(d_n > 0, -(-length // per_tile), 0)
    tile_leg, tile_k, tile_first = _expand(n_tiles)
    ta = start[tile_leg] + tile_k * per_tile[tile_leg]
    tb = np.minimum(ta + per_tile[tile_leg], stop[tile_leg])
    tile_leaf = leaf[tile_leg]

    # ---- streams (one per source / destination of each tile) -----------------
    sd = (s_n + d_n)[tile_leg]
    si_tile, si_slot, si_first = _expand(sd)
    si_code = _SLOT_BUF[tile_leaf[si_tile], si_slot]
    if net_next:  # a destination on the successor becomes our gateway staging buffer
        si_code = np.where(si_code % 2 == int(Owner.NEXT), int(Buf.GW) * 2 + int(Owner.SELF),
                           si_code)
    si_a, si_b = ta[si_tile], tb[si_tile]
    # runs per stream, grouped by buffer then scattered back into stream order
    run_count = np.zeros(si_code.size, np.int64)
    per_code: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
    for code in np.unique(si_code):
        sel = np.nonzero(si_code == code)[0]
        view = ctx.views[Buf(int(code) // 2)]
        owner_idx, addr, nbytes = view.runs(si_a[sel], si_b[sel])
        run_count[sel] = np.bincount(owner_idx, minlength=sel.size)
        per_code[int(code)] = (sel, owner_idx, addr, nbytes)
    run_first = np.cumsum(run_count) - run_count
    total_bd = int(run_count.sum())
    bd_addr = np.zeros(total_bd, np.int64)
    bd_len = np.zeros(total_bd, np.int64)
    bd_stream = np.zeros(total_bd, np.int64)
    for code, (sel, owner_idx, addr, nbytes) in per_code.items():
        _o, within, _f = _expand(run_count[sel])
        pos = run_first[sel][owner_idx] + within
        if code % 2 == int(Owner.NEXT):
            addr = addr + b_core(nxt) | _route_bits(nxt.device, ctx.me.device)
        else:
            addr = addr + b_core(ctx.me)
        bd_addr[pos] = addr
        bd_len[pos] = nbytes
        bd_stream[pos] = sel[owner_idx]
    if total_bd and bd_len.max() > F.BD_MAX_BYTES:
        raise LimitError(f"a BD of {int(bd_len.max())} bytes exceeds {F.BD_MAX_BYTES}")
    bd_slot = si_slot[bd_stream]
    bd_tile = si_tile[bd_stream]
    bd_leg = tile_leg[bd_tile]
    is_src = bd_slot < s_n[bd_leg]
    stream_index = np.where(is_src, bd_slot, bd_slot - s_n[bd_leg])
    # FIRST / LAST: first and last BD of each tile
    tile_bd_count = np.bincount(bd_tile, minlength=tile_leg.size) if total_bd else \
        np.zeros(tile_leg.size, np.int64)
    tile_bd_first = np.cumsum(tile_bd_count) - tile_bd_count
    bd_pos_in_tile = np.arange(total_bd) - tile_bd_first[bd_tile] if total_bd else bd_tile
    gen = ((st.bd_count + np.arange(total_bd, dtype=np.int64)) // F.BD_RING_ENTRIES) & F.GEN_MASK
    sdma_op_leg = np.where(reduce, int(SdmaOp.CCE), np.where(d_n > 0, int(SdmaOp.CME), 0))
    bds = np.zeros(total_bd, F.BD_DTYPE)
    bds["len_ctrl"] = ((bd_len & F.LEN_MASK) | (gen << F.GEN_SHIFT)
                       | np.where(bd_pos_in_tile == 0, F.LEN_FIRST, 0)
                       | np.where(bd_pos_in_tile == tile_bd_count[bd_tile] - 1, F.LEN_LAST, 0))
    bds["meta_ctrl"] = (sdma_op_leg[bd_leg] | np.where(is_src, 0, F.META_DIR_S2M)
                        | (stream_index << F.META_STREAM_SHIFT))
    bds["buf_ptr"] = bd_addr.astype(np.uint64)
    st.bd_count += total_bd
    dma_first_all = b.append("dma.bin", bds)

    # ---- CCE descriptors (one per source per reduce tile) -------------------
    red_tile = reduce[tile_leg]
    cce_per_tile = np.where(red_tile, s_n[tile_leg], 0)
    c_tile, c_src, c_first = _expand(cce_per_tile)
    cce = np.zeros(c_tile.size, F.CCE_DTYPE)
    if c_tile.size:
        in_dt, out_dt, acc_dt = cce_dtype_nibbles(ctx.dtype)
        n_src = s_n[tile_leg[c_tile]]
        tile_bytes = (tb - ta)[c_tile] * dsize
        cce["w0"] = F.CCE_W0_META | (c_src << 24)
        cce["w1"] = ((ctx.cce_op & 7) | np.where(c_src == n_src - 1, F.CCE_LAST, 0)
                     | (in_dt << 8) | (out_dt << 12) | (acc_dt << 16) | F.CCE_VALID)
        cce["w2"] = tile_bytes & 0xFFFFFF
        cce["w3"] = n_src | (ctx.reduction_type << 8)
    cce_first_all = b.append("cce.bin", cce)

    # ---- semaphore BDs (waits, then increments) ------------------------------
    n_sem = waits.astype(np.int64) + 1 + sends.astype(np.int64)
    total_legs = n + 1  # + mark_end
    sem_leg_counts = np.append(n_sem, 1)
    s_leg, s_k, s_first = _expand(sem_leg_counts)
    sems = np.zeros(s_leg.size, F.SEM_DTYPE)
    leg_waits = np.append(waits, False)
    leg_sends = np.append(sends, False)
    k_inc = s_k - leg_waits[s_leg]  # 0 = compl inc, 1 = send inc
    is_end = s_leg == n
    is_wait = (s_k == 0) & leg_waits[s_leg]
    wait_recv_addr = _sema_addr(sp, recv_sem, EVT_SEM_DEC)
    compl_inc_addr = _sema_addr(sp, compl_sem, EVT_SEM_INC)
    compl_dec_addr = _sema_addr(sp, compl_sem, EVT_SEM_DEC)
    if net_next:
        send_addr = _sema_addr(sp, send_sem, EVT_SEM_INC)
        send_role, send_remote = SEM_ROLE_SEND, 0
    else:
        send_addr = (_sema_addr(nxt.logical_core, recv_sem, EVT_SEM_INC)
                     | _route_bits(nxt.device, ctx.me.device))
        send_role, send_remote = SEM_ROLE_RECV, F.SEM_REMOTE
    subop = np.where(is_end | is_wait, int(EvtSemSubop.WAIT_GE_AND_DEC), int(EvtSemSubop.INC))
    role = np.where(is_end, SEM_ROLE_COMPL,
                    np.where(is_wait, SEM_ROLE_RECV,
                             np.where(k_inc == 0, SEM_ROLE_COMPL, send_role)))
    remote = np.where(~is_end & ~is_wait & (k_inc == 1), send_remote, 0)
    sgen = ((st.sem_count + np.arange(s_leg.size, dtype=np.int64)) // F.BD_RING_ENTRIES) & F.GEN_MASK
    sems["ctrl"] = subop | (role << F.SEM_ROLE_SHIFT) | remote | (sgen << F.GEN_SHIFT)
    sems["value"] = np.where(is_end, n, 1)
    sems["addr"] = np.where(is_end, compl_dec_addr,
                            np.where(is_wait, wait_recv_addr,
                                     np.where(k_inc == 0, compl_inc_addr, send_addr))
                            ).astype(np.uint64)
    st.sem_count += s_leg.size
    sem_first_all = b.append("sem.bin", sems)

    # ---- 0xBF words: per data leg, pieces of <= 256 elements per dimension ----
    full = length // (F.T3D_DIM_CAP * F.T3D_DIM_CAP)
    q = (length // F.T3D_DIM_CAP) % F.T3D_DIM_CAP
    r = length % F.T3D_DIM_CAP
    pieces = np.where(d_n > 0, full + (q > 0) + (r > 0), 0)
    p_leg, p_k, p_first = _expand(pieces)
    kind = np.where(p_k < full[p_leg], 0, np.where((p_k == full[p_leg]) & (q[p_leg] > 0), 1, 2))
    n0 = np.where(kind == 2, r[p_leg], F.T3D_DIM_CAP)
    n1 = np.where(kind == 0, F.T3D_DIM_CAP, np.where(kind == 1, q[p_leg], 1))
    piece_off = p_k * F.T3D_DIM_CAP * F.T3D_DIM_CAP  # elements before this piece (kinds 0/1)
    piece_off = np.where(kind == 2, length[p_leg] - r[p_leg], piece_off)
    words = np.zeros(p_leg.size, F.SB2SB_DTYPE)
    words["opcode"] = 0xBF
    words["inst_word_len"] = 16
    first_piece = p_k == 0
    last_piece = p_k == pieces[p_leg] - 1
    words["wait_mode"] = np.where(first_piece & waits[p_leg], int(EvtSemSubop.WAIT_GE_AND_DEC), 0)
    words["wait_idx"] = np.where(first_piece & waits[p_leg], recv_sem, 0)
    words["semaphore_value"] = np.where(first_piece & waits[p_leg], 1, 0)
    words["update_mode"] = np.where(last_piece, int(EvtSemSubop.INC), 0)
    words["update_idx"] = np.where(last_piece, compl_sem, 0)
    words["in_dtype"] = io_code(ctx.dtype)
    words["out_dtype"] = io_code(ctx.dtype)
    elem0 = start[p_leg] + piece_off
    for part in ("src", "dst"):
        if part == "src":
            code = _SLOT_BUF[leaf[p_leg], 0]
        else:
            code = _SLOT_BUF[leaf[p_leg], s_n[p_leg]]
        start_addr = np.zeros(p_leg.size, np.int64)
        for c in np.unique(code):
            sel = code == c
            view = ctx.views[Buf(int(c) // 2)]
            start_addr[sel] = view.address(elem0[sel]) - view.anchor
        if (start_addr < 0).any() or (start_addr > 0xFFFFFFFF).any():
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

    # ---- legs ----------------------------------------------------------------
    legs = np.zeros(total_legs, F.LEG_DTYPE)
    legs["trigger"] = ctx.trigger
    legs["spad_index"] = ctx.spad_index
    legs["channel"] = channel
    legs["sdma_op"] = np.append(sdma_op_leg, 0)
    legs["step"] = step_base + np.arange(total_legs)
    legs["leaf"] = np.append(leaf, int(Leaf.mark_end))
    legs["half"] = np.append(legs_in["half"], 0)
    legs["reduction_type"] = np.append(np.where(reduce, ctx.reduction_type, F.NO_REDUCTION_TYPE),
                                       F.NO_REDUCTION_TYPE)
    neigh = np.where(sends, int(EncdNeigh.ENCD_NEIGH_NEXT),
                     np.where(d_n > 0, int(EncdNeigh.ENCD_NEIGH_LOCAL),
                              int(EncdNeigh.ENCD_NEIGH_PREV)))
    legs["neigh"] = np.append(neigh, int(EncdNeigh.ENCD_NEIGH_LOCAL))
    legs["sb2sb_first"] = sb_first_all + np.append(p_first, p_leg.size)
    legs["sb2sb_count"] = np.append(pieces, 0)
    legs["n_tiles"] = np.append(n_tiles, 0)
    leg_bd_count = np.bincount(bd_leg, minlength=n) if total_bd else np.zeros(n, np.int64)
    legs["dma_first"] = dma_first_all + np.append(np.cumsum(leg_bd_count) - leg_bd_count, total_bd)
    legs["dma_count"] = np.append(leg_bd_count, 0)
    leg_cce = np.bincount(tile_leg[c_tile], minlength=n) if c_tile.size else np.zeros(n, np.int64)
    legs["cce_first"] = cce_first_all + np.append(np.cumsum(leg_cce) - leg_cce, c_tile.size)
    legs["cce_count"] = np.append(leg_cce, 0)
    legs["sem_first"] = sem_first_all + s_first
    legs["sem_count"] = sem_leg_counts
    legs["elem_start"] = np.append(start, 0).astype(np.uint64)
    legs["num_elements"] = np.append(length, 0)
    legs["ring_step"] = np.append(legs_in["step"] + legs_in["group"] * (legs_in["step"].max() + 1
                                  if n else 0), 0)
    b.append("legs.bin", legs)

    # ---- tp_inc_steps: m2s / s2m BD counts per leg, run-length encoded -------
    m2s = np.bincount(bd_leg[is_src], minlength=n) if total_bd else np.zeros(n, np.int64)
    s2m = leg_bd_count - m2s
    m2s = np.append(m2s, 0)
    s2m = np.append(s2m, 0)
    change = np.ones(total_legs, bool)
    change[1:] = (m2s[1:] != m2s[:-1]) | (s2m[1:] != s2m[:-1])
    run_start = np.nonzero(change)[0]
    run_len = np.diff(np.append(run_start, total_legs))
    # split runs longer than the u16 repeat field
    splits = -(-run_len // 0xFFFF)
    r_idx, r_k, _ = _expand(splits)
    rep = np.minimum(run_len[r_idx] - r_k * 0xFFFF, 0xFFFF)
    tp = np.zeros(r_idx.size, F.TPINC_DTYPE)
    if np.any(m2s > 0xFFFE) or np.any(s2m > 0xFFFE):
        raise LimitError("a leg needs more than 65534 BDs in one tp_inc_steps record")
    tp["m2s"] = m2s[run_start][r_idx]
    tp["s2m"] = s2m[run_start][r_idx]
    tp["repeat"] = rep
    tp["flags"][-1:] = F.TPINC_LAST_SYNC
    b.tpinc_by_entry[(ctx.spad_index, channel)] = tp

    # ---- net-proxy FIFOs -------------------------------------------------------
    tx = rx = 0
    if net_next or net_prev:
        info = np.zeros(1, F.NET_OPS_INFO_DTYPE)
        info["inc_send_handshake"] = info["inc_send_complete"] = _sema_addr(sp, send_sem,
                                                                            EVT_SEM_INC)
        info["inc_recv_handshake"] = info["inc_recv_complete"] = _sema_addr(sp, recv_sem,
                                                                            EVT_SEM_INC)
        info["net_idx_loop_size"] = F.NET_INDEX_LOOP_SIZE
        info["initial_send_credits"] = F.NET_INITIAL_SEND_CREDITS
        info["ending_recv_credits"] = F.NET_ENDING_RECV_CREDITS
        info["data_type_sz"] = SDMA_DATA_TYPE_SIZE[ctx.dtype]
        info["basic_block_id"] = ctx.subgraph_index
        info["func_rel_op_idx"] = ctx.trigger
        info["unrolled_count"] = ctx.groups
        info["enc_channel"] = channel
        st.ops.append(info)
        op_idx = len(st.ops) - 1
        if net_next:
            tx = _net_tx(st, ctx, legs_in, sends, op_idx, nxt)
            info["tx_entry_cnt"] = tx
            st.src.append(_terminator(F.NET_SRC_ADDR_DTYPE, op_idx, "dst_rank"))
        if net_prev:
            rx = _net_rx(st, ctx, legs_in, waits, op_idx, prv)
            info["rx_entry_cnt"] = rx
            st.dest.append(_terminator(F.NET_DEST_ADDR_DTYPE, op_idx, "src_rank"))
    return {"legs": total_legs, "tx": tx, "rx": rx, "bds": total_bd}


def b_core(peer: Peer) -> int:
    return MemoryMap.core_base(peer.logical_core)


def _route_bits(device: int, self_device: int) -> int:
    """Routing bits of a target on ``device`` seen from ``self_device`` (0 when local)."""
    return route(0, device, self_device)


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
    order = np.concatenate([k for k, _ in recs])
    allrec = np.concatenate([r for _, r in recs])[np.argsort(order, kind="stable")]
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
    order = np.concatenate([k for k, _ in recs])
    allrec = np.concatenate([r for _, r in recs])[np.argsort(order, kind="stable")]
    st.dest.append(allrec)
    return int(allrec.size)
