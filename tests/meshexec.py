"""A small, independent executor of lowered output folders, used by the mesh and RDH tests.

It reads only the emitted bytes (legs.bin, dma.bin, cce.bin, sem.bin, the net-proxy FIFOs)
and the manifests, and runs them the way docs/FORMATS.md §2.1, §3.1 and §8 describe:

* a rank runs its SPAD entries in order; an entry's channels run concurrently, each channel's
  legs in order; the entry completes when every channel has run its legs and the net proxy
  has made every transfer the entry's legs handed it;
* a leg waits (``wait_ge_and_dec``), moves its tiles (CCE reduce in fp32, rounded once), then
  increments;
* the net proxy of (rank, channel) walks its transmit FIFO: before a leg's first entry it takes
  one ``send_sema`` count, copies the bytes to the paired receive entry's ``dev_addr`` (the
  k-th transmit entry of r -> P pairs with P's k-th receive entry from r on that channel), and
  after a leg's last entry increments the semaphore the *receiving op's* ``inc_recv_complete``
  names.

A seeded random scheduler picks the next runnable actor.  Happens-before is checked with
vector clocks and the simulator's shadow memory (:mod:`nrtrewrite.simulate.shadow`); data
are the simulator's exact test inputs (:mod:`nrtrewrite.simulate.testdata`).  At the end
every output must match the reference bit for bit and every semaphore must be back at 0.
It is deliberately independent of the composers: it knows nothing about rings or meshes.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nrtrewrite.codes import DType, NUMPY_DTYPE, NetAddrMark
from nrtrewrite.emit.address import EVT_SEM_DEC, EVT_SEM_INC
from nrtrewrite.simulate.artifacts import load_rank, read_top_manifest
from nrtrewrite.simulate.layout import Layout
from nrtrewrite.simulate.shadow import Access, Conflict, Shadow
from nrtrewrite.simulate.testdata import Reference, make_input
from nrtrewrite.simulate.triggers import load_triggers

WAIT, INC = 20, 21
#: dma.bin bits as docs/FORMATS.md §5 tables them, written here rather than imported from
#: the emitter, so that the emitter's bytes are read the way the document says
BD_LEN_MASK = 0xFFFF  # len_ctrl [15:0], bytes; 0 means 65536
BD_FIRST = 1 << 26  # len_ctrl [26]: first BD of the tile
BD_LAST = 1 << 27  # len_ctrl [27]: last BD of the tile
BD_DIR_BIT = 4  # meta_ctrl [4]: 0 M2S (a source), 1 S2M (a destination)
BD_STREAM_SHIFT, BD_STREAM_MASK = 8, 0x1F  # meta_ctrl [12:8]: the source / destination index
_UFUNC = {0: np.add, 2: np.maximum, 3: np.minimum}


class ExecError(AssertionError):
    pass


@dataclass
class XLeg:
    record: int
    waits: list  # (rank, sem, value)
    incs: list
    tiles: list  # [(srcs, dsts)], each a list of streams, a stream a list of (rank, reg, off, n)
    cce: tuple | None  # (op, in dtype code, out dtype code)


@dataclass
class XTransfer:
    entry_trigger: int
    first: bool
    complete: bool
    src: tuple  # (rank, reg, off)
    dst: tuple
    size: int
    notify: tuple | None  # (rank, sem)
    sender: int


@dataclass
class Actor:
    tid: int
    rank: int
    kind: str  # "queue" | "proxy"
    items: list
    pos: int = 0
    entry: int = -1
    channel: int = -1
    done_by_trigger: dict = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.pos >= len(self.items)


def _check(cond: bool, why: str) -> None:
    if not cond:
        raise ExecError(why)


def _segment_bases(ops, recs, cnt_field: str) -> list[int]:
    """Per record of one channel's FIFO slice, the channel index of its segment's first op:
    the FIFO is one segment per basic block with an op whose ``cnt_field`` > 0, in block
    order, each ending with its EXEC_COMPLETE entry; net_op_idx counts from 0 in a segment
    (docs/FORMATS.md §8 "Basic blocks")."""
    bb = [int(b) for b in ops["basic_block_id"]]
    firsts = [k for k in range(len(bb)) if k == 0 or bb[k] != bb[k - 1]]
    seg_firsts = [a for a in firsts
                  if any(int(ops[cnt_field][k]) for k in range(a, len(bb)) if bb[k] == bb[a])]
    out, j = [], 0
    for rec in recs:
        _check(j < len(seg_firsts), "a FIFO record after the last segment")
        out.append(seg_firsts[j])
        if int(rec["mark"]) == int(NetAddrMark.EXEC_COMPLETE):
            j += 1
    return out


class MeshExec:
    def __init__(self, out: str | Path, seed: int = 0, only: set[int] | None = None):
        self.out = Path(out)
        self.seed = seed
        self.only = only  # trigger ordinals to run (None: all); the others are left out
        top = read_top_manifest(self.out)
        self.layout = Layout(top)
        self.trigs = load_triggers(top)
        self.ranks = [int(r) for r in top["ranks"]]
        self.rng = random.Random(seed)
        self.actors: list[Actor] = []
        self.ctrl: dict[int, int] = {}
        self.entries: dict[int, list[dict]] = {}
        self.queues: dict[tuple[int, int], list[int]] = {}  # (rank, entry) -> queue tids
        self.proxies: dict[tuple[int, int], int] = {}  # (rank, channel) -> tid
        self.pending_tx: dict[tuple[int, int], int] = {}  # (rank, trigger) -> transfers left
        for r in self.ranks:
            self.ctrl[r] = self._new_actor(r, "ctrl", [])
        self.rx_by_pair: dict[tuple[int, int, int], deque] = {}
        self.fifos: dict[tuple[int, int], list] = {}
        for r in self.ranks:
            self._decode(r, load_rank(self.out, r))
        self._pair()
        n = len(self.actors)
        self.vc = np.zeros((n, n), np.int64)
        self.sems: dict[tuple[int, int], deque] = {}  # tokens (value, vc)
        self.count: dict[tuple[int, int], int] = {}
        self.mem: dict[tuple[int, int], np.ndarray] = {}
        self.shadow: dict[tuple[int, int], Shadow] = {}
        self.refs: dict[int, Reference] = {}
        self.outputs: list = []
        self.stats = {"legs": 0, "transfers": 0}

    # ------------------------------------------------------------------ decoding
    def _new_actor(self, rank: int, kind: str, items: list) -> int:
        a = Actor(len(self.actors), rank, kind, items)
        self.actors.append(a)
        return a.tid

    def _decode(self, r: int, rf) -> None:
        A = rf.arrays
        lay = self.layout
        man = rf.manifest["entries"]
        keep = [i for i, e in enumerate(man)
                if self.only is None or int(e["trigger"]) in self.only]
        new_index = {old: new for new, old in enumerate(keep)}
        self.entries[r] = [man[i] for i in keep]
        L = A["legs.bin"]
        sems = A["sem.bin"]
        bds = A["dma.bin"]
        cce = A["cce.bin"]
        s_rank, s_win, s_sid, s_err = lay.resolve_sema(r, sems["addr"]) if sems.size else (
            [], [], [], [])
        length = bds["len_ctrl"].astype(np.int64) & BD_LEN_MASK
        length = np.where(length == 0, 65536, length)
        b_rank, b_reg, b_off, b_err = lay.resolve_data(r, bds["buf_ptr"], length) if bds.size \
            else ([], [], [], [])
        _check(not np.any(np.asarray(b_err)), f"rank {r}: a BD address does not resolve")
        _check(not np.any(np.asarray(s_err)), f"rank {r}: a semaphore address does not resolve")
        by_q: dict[tuple[int, int], list] = {}
        for g in range(L.size):
            if int(L["spad_index"][g]) not in new_index:
                continue
            leg = L[g]
            waits, incs = [], []
            for j in range(int(leg["sem_first"]), int(leg["sem_first"] + leg["sem_count"])):
                sub = int(sems["ctrl"][j]) & 0xFF
                item = (int(s_rank[j]), int(s_sid[j]), int(sems["value"][j]))
                if sub == WAIT:
                    _check(int(s_win[j]) == EVT_SEM_DEC and item[0] == r,
                           f"rank {r} leg {g}: a wait through the wrong window or on a peer")
                    waits.append(item)
                else:
                    _check(sub == INC and int(s_win[j]) == EVT_SEM_INC,
                           f"rank {r} leg {g}: bad increment")
                    incs.append(item)
            tiles = []
            d0, dn = int(leg["dma_first"]), int(leg["dma_count"])
            cur = None
            for j in range(d0, d0 + dn):
                lc, mc = int(bds["len_ctrl"][j]), int(bds["meta_ctrl"][j])
                if lc & BD_FIRST:
                    cur = ({}, {})
                    tiles.append(cur)
                _check(cur is not None, f"rank {r} leg {g}: BD before FIRST")
                # LAST on exactly the tile's last BD: before the next FIRST or the leg's end
                ends = j + 1 == d0 + dn or bool(int(bds["len_ctrl"][j + 1]) & BD_FIRST)
                _check(bool(lc & BD_LAST) == ends, f"rank {r} leg {g}: BD {j}'s LAST bit")
                is_dst = (mc >> BD_DIR_BIT) & 1
                stream = (mc >> BD_STREAM_SHIFT) & BD_STREAM_MASK
                cur[is_dst].setdefault(stream, []).append(
                    (int(b_rank[j]), int(b_reg[j]), int(b_off[j]), int(length[j])))
            tiles = [([s[k] for k in sorted(s)], [d[k] for k in sorted(d)]) for s, d in tiles]
            cc = None
            if int(leg["cce_count"]):
                w1 = int(cce["w1"][int(leg["cce_first"])])
                cc = (w1 & 7, (w1 >> 8) & 0xF, (w1 >> 12) & 0xF)
            by_q.setdefault((int(leg["spad_index"]), int(leg["channel"])), []).append(
                XLeg(g, waits, incs, tiles, cc))
        for (e, ch), legs in by_q.items():
            if e not in new_index:
                continue
            e = new_index[e]
            tid = self._new_actor(r, "queue", legs)
            self.actors[tid].entry, self.actors[tid].channel = e, ch
            self.queues.setdefault((r, e), []).append(tid)
        # FIFOs
        ops, src, dest = A["net_ops.bin"], A["net_src.bin"], A["net_dest.bin"]
        for item in rf.manifest.get("fifo", []):
            ch = int(item["channel"])
            o0, on = item["ops"]
            s0, sn = item["src"]
            t0, tn = item["dest"]
            cops = ops[o0:o0 + on]
            notify = []
            for op in cops:
                tr, _w, sid, err = lay.resolve_sema(r, np.array([op["inc_recv_complete"]],
                                                                np.uint64))
                _check(not err[0] and int(tr[0]) == r, "inc_recv_complete is not this rank's")
                notify.append(int(sid[0]))
            sendsem = []
            for op in cops:
                tr, _w, sid, err = lay.resolve_sema(r, np.array([op["inc_send_handshake"]],
                                                                np.uint64))
                _check(not err[0] and int(tr[0]) == r, "inc_send_handshake is not this rank's")
                sendsem.append(int(sid[0]))
            txs = []
            prev_complete = True
            tx_base = _segment_bases(cops, src[s0:s0 + sn], "tx_entry_cnt")
            for rec, base in zip(src[s0:s0 + sn], tx_base):
                if int(rec["mark"]) in (int(NetAddrMark.NET_OP_COMPLETE),
                                        int(NetAddrMark.EXEC_COMPLETE)):
                    _check(int(rec["size"]) == 0 and int(rec["dst_rank"]) == -1, "bad terminator")
                    prev_complete = True
                    continue
                k = base + int(rec["net_op_idx"])
                if self.only is not None and int(cops[k]["func_rel_op_idx"]) not in self.only:
                    prev_complete = bool(rec["complete"])
                    continue
                s_r, s_reg, s_off, e1 = lay.resolve_data(r, np.array([rec["dev_addr"]], np.uint64),
                                                         np.array([rec["size"]]))
                _check(not e1[0] and int(s_r[0]) == r, "net_src dev_addr is not local")
                txs.append(dict(op=k, trigger=int(cops[k]["func_rel_op_idx"]), first=prev_complete,
                                complete=bool(rec["complete"]),
                                src=(r, int(s_reg[0]), int(s_off[0])),
                                size=int(rec["size"]), dst_rank=int(rec["dst_rank"]),
                                dst_addr=int(rec["dst_addr"]), send_sem=sendsem[k]))
                prev_complete = bool(rec["complete"])
            rx_base = _segment_bases(cops, dest[t0:t0 + tn], "rx_entry_cnt")
            for rec, base in zip(dest[t0:t0 + tn], rx_base):
                if int(rec["mark"]) in (int(NetAddrMark.NET_OP_COMPLETE),
                                        int(NetAddrMark.EXEC_COMPLETE)):
                    _check(int(rec["size"]) == 0 and int(rec["src_rank"]) == -1, "bad terminator")
                    continue
                k = base + int(rec["net_op_idx"])
                if self.only is not None and int(cops[k]["func_rel_op_idx"]) not in self.only:
                    continue
                d_r, d_reg, d_off, e2 = lay.resolve_data(r, np.array([rec["dev_addr"]], np.uint64),
                                                         np.array([rec["size"]]))
                _check(not e2[0] and int(d_r[0]) == r, "net_dest dev_addr is not local")
                self.rx_by_pair.setdefault((int(rec["src_rank"]), r, ch), deque()).append(dict(
                    dev_addr=int(rec["dev_addr"]), dst=(r, int(d_reg[0]), int(d_off[0])),
                    size=int(rec["size"]), complete=bool(rec["complete"]), notify=notify[k]))
            self.fifos[(r, ch)] = txs

    def _pair(self) -> None:
        for (r, ch), txs in self.fifos.items():
            items = []
            for t in txs:
                q = self.rx_by_pair.get((r, t["dst_rank"], ch))
                _check(bool(q), f"rank {r} channel {ch}: a transmit entry to rank "
                                f"{t['dst_rank']} has no receive entry")
                rx = q.popleft()
                _check(rx["dev_addr"] == t["dst_addr"],
                       f"rank {r} -> {t['dst_rank']}: dst_addr {t['dst_addr']:#x} != "
                       f"{rx['dev_addr']:#x}")
                _check(rx["size"] == t["size"] and rx["complete"] == t["complete"],
                       f"rank {r} -> {t['dst_rank']}: size / complete differ")
                items.append(XTransfer(t["trigger"], t["first"], t["complete"], t["src"],
                                       rx["dst"], t["size"],
                                       (t["dst_rank"], rx["notify"]) if t["complete"] else None,
                                       r))
                items[-1].send_sem = t["send_sem"]  # type: ignore[attr-defined]
                key = (r, t["trigger"])
                self.pending_tx[key] = self.pending_tx.get(key, 0) + 1
            if items:
                self.proxies[(r, ch)] = self._new_actor(r, "proxy", items)
        left = [k for k, q in self.rx_by_pair.items() if q]
        _check(not left, f"receive entries without a transmit entry: {left[:3]}")

    # ------------------------------------------------------------------ memory
    def _buf(self, rank: int, reg: int) -> np.ndarray:
        key = (rank, reg)
        if key not in self.mem:
            self.mem[key] = np.zeros(self.layout.region(reg).storage, np.uint8)
            self.shadow[key] = Shadow(self.layout.region(reg).storage)
        return self.mem[key]

    def _read(self, runs, acc: Access, vc) -> np.ndarray:
        parts = []
        for rank, reg, off, n in runs:
            buf = self._buf(rank, reg)
            try:
                self.shadow[(rank, reg)].read(off, off + n, acc, vc)
            except Conflict as c:
                raise ExecError(f"{acc.who}: {c.kind} reading rank {rank} region "
                                f"{self.layout.region(reg).name} [{c.lo:#x}, {c.hi:#x}) vs "
                                f"{c.other.who if c.other else None}") from None
            parts.append(buf[off:off + n])
        return np.concatenate(parts) if parts else np.zeros(0, np.uint8)

    def _write(self, runs, data: np.ndarray, acc: Access, vc) -> None:
        pos = 0
        for rank, reg, off, n in runs:
            buf = self._buf(rank, reg)
            try:
                self.shadow[(rank, reg)].write(off, off + n, acc, vc)
            except Conflict as c:
                raise ExecError(f"{acc.who}: {c.kind} writing rank {rank} region "
                                f"{self.layout.region(reg).name} [{c.lo:#x}, {c.hi:#x}) vs "
                                f"{c.other.who if c.other else None}") from None
            buf[off:off + n] = data[pos:pos + n]
            pos += n

    # ------------------------------------------------------------------ semaphores
    def _can_take(self, rank: int, sem: int, val: int) -> bool:
        return self.count.get((rank, sem), 0) >= val

    def _take(self, tid: int, rank: int, sem: int, val: int) -> None:
        q = self.sems[(rank, sem)]
        need = val
        while need:
            v, vc = q[0]
            use = min(v, need)
            np.maximum(self.vc[tid], vc, out=self.vc[tid])
            need -= use
            if use == v:
                q.popleft()
            else:
                q[0] = (v - use, vc)
        self.count[(rank, sem)] -= val

    def _give(self, tid: int, rank: int, sem: int, val: int) -> None:
        self.sems.setdefault((rank, sem), deque()).append((val, self.vc[tid].copy()))
        self.count[(rank, sem)] = self.count.get((rank, sem), 0) + val

    # ------------------------------------------------------------------ running
    def _trigger_of(self, rank: int, entry: int) -> int:
        return int(self.entries[rank][entry]["trigger"])

    def _start_entry(self, rank: int, e: int) -> None:
        ctrl = self.ctrl[rank]
        t = self.trigs[self._trigger_of(rank, e)]
        first = e == 0 or self._trigger_of(rank, e - 1) != t.ordinal
        if first:
            self.vc[ctrl, ctrl] += 1
            pos = t.pos(rank)
            data = make_input(self.seed, t.ordinal, pos, len(t.group), t.in_count, t.dtype,
                              t.alu or "ADD", t.reduce)
            fp = t.footprints(self.layout)[0]
            buf = self._buf(rank, fp.region.index)
            acc = Access(ctrl, int(self.vc[ctrl, ctrl]), t.ordinal, Access.FILL,
                         f"fill of rank {rank}")
            for a, b in fp.intervals():
                self.shadow[(rank, fp.region.index)].write(a, b, acc, self.vc[ctrl])
            fp.scatter(buf, np.ascontiguousarray(data).view(np.uint8))
            ref = self.refs.setdefault(t.ordinal, Reference(t.op, t.alu, t.dtype, t.group, t.n))
            ref.add(pos, fp.gather(buf).view(NUMPY_DTYPE[t.dtype]))
        for tid in self.queues.get((rank, e), []):
            np.maximum(self.vc[tid], self.vc[ctrl], out=self.vc[tid])
            self.ready.add(tid)

    def _finish_entry(self, rank: int, e: int) -> None:
        ctrl = self.ctrl[rank]
        for tid in self.queues.get((rank, e), []):
            np.maximum(self.vc[ctrl], self.vc[tid], out=self.vc[ctrl])
        for (r, _ch), ptid in self.proxies.items():
            if r == rank:
                np.maximum(self.vc[ctrl], self.vc[ptid], out=self.vc[ctrl])
        t = self.trigs[self._trigger_of(rank, e)]
        last = e + 1 == len(self.entries[rank]) or self._trigger_of(rank, e + 1) != t.ordinal
        if last:
            self.vc[ctrl, ctrl] += 1
            fp = t.footprints(self.layout)[1]
            buf = self._buf(rank, fp.region.index)
            acc = Access(ctrl, int(self.vc[ctrl, ctrl]), t.ordinal, Access.CHECK,
                         f"output check of rank {rank}")
            for a, b in fp.intervals():
                try:
                    bad = self.shadow[(rank, fp.region.index)].check_output(a, b, acc,
                                                                            self.vc[ctrl])
                except Conflict as c:
                    raise ExecError(f"trigger {t.ordinal} rank {rank}: output {c.kind} vs "
                                    f"{c.other.who if c.other else None}") from None
                _check(not bad, f"trigger {t.ordinal} rank {rank}: output bytes {bad[:2]} not "
                                "written by the collective")
            self.outputs.append((t, rank, fp.gather(buf)))

    def _entry_done(self, rank: int) -> bool:
        e = self.cur[rank]
        if any(not self.actors[t].finished for t in self.queues.get((rank, e), [])):
            return False
        return self.pending_tx.get((rank, self._trigger_of(rank, e)), 0) == 0

    def _runnable(self, a: Actor) -> bool:
        if a.finished:
            return False
        if a.kind == "queue":
            if self.cur[a.rank] != a.entry:
                return False
            need: dict = {}
            for rk, s, v in a.items[a.pos].waits:
                need[(rk, s)] = need.get((rk, s), 0) + v
            return all(self._can_take(rk, s, v) for (rk, s), v in need.items())
        t = a.items[a.pos]
        return not t.first or self._can_take(a.rank, t.send_sem, 1)

    def _step(self, a: Actor) -> None:
        tid = a.tid
        if a.kind == "queue":
            leg: XLeg = a.items[a.pos]
            for rk, s, v in leg.waits:
                self._take(tid, rk, s, v)
            self.vc[tid, tid] += 1
            acc = Access(tid, int(self.vc[tid, tid]), self._trigger_of(a.rank, a.entry),
                         Access.LEG, f"rank {a.rank} leg {leg.record}")
            for srcs, dsts in leg.tiles:
                data = [self._read(s, acc, self.vc[tid]) for s in srcs]
                if leg.cce is not None:
                    op, in_c, out_c = leg.cce
                    in_np, out_np = NUMPY_DTYPE[DType(in_c)], NUMPY_DTYPE[DType(out_c)]
                    accv = data[0].view(in_np).astype(np.float32)
                    for d in data[1:]:
                        accv = _UFUNC[op](accv, d.view(in_np).astype(np.float32))
                    res = accv.astype(out_np).view(np.uint8)
                else:
                    _check(len(data) == 1, "a copy tile with several sources")
                    res = data[0]
                for d in dsts:
                    self._write(d, res, acc, self.vc[tid])
            for rk, s, v in leg.incs:
                self._give(tid, rk, s, v)
            self.stats["legs"] += 1
        else:
            t: XTransfer = a.items[a.pos]
            if t.first:
                self._take(tid, a.rank, t.send_sem, 1)
            self.vc[tid, tid] += 1
            acc = Access(tid, int(self.vc[tid, tid]), t.entry_trigger, Access.PROXY,
                         f"proxy of rank {a.rank} -> {t.dst[0]}")
            data = self._read([(t.src[0], t.src[1], t.src[2], t.size)], acc, self.vc[tid])
            self._write([(t.dst[0], t.dst[1], t.dst[2], t.size)], data, acc, self.vc[tid])
            if t.notify is not None:
                self._give(tid, t.notify[0], t.notify[1], 1)
            self.pending_tx[(t.sender, t.entry_trigger)] -= 1
            self.stats["transfers"] += 1
        a.pos += 1

    def run(self) -> dict:
        self.cur = {r: 0 for r in self.ranks}
        self.ready: set[int] = set(self.proxies.values())
        for r in self.ranks:
            if self.entries[r]:
                self._start_entry(r, 0)
        while True:
            progressed = False
            for r in self.ranks:
                while self.cur[r] < len(self.entries[r]) and self._entry_done(r):
                    self._finish_entry(r, self.cur[r])
                    self.cur[r] += 1
                    if self.cur[r] < len(self.entries[r]):
                        self._start_entry(r, self.cur[r])
                    progressed = True
            cands = [t for t in self.ready if self._runnable(self.actors[t])]
            if not cands:
                if progressed:
                    continue
                break
            a = self.actors[self.rng.choice(sorted(cands))]
            self._step(a)
            if a.finished:
                self.ready.discard(a.tid)
        stuck = [r for r in self.ranks if self.cur[r] < len(self.entries[r])]
        if stuck:
            blocked = []
            for a in self.actors:
                if a.kind != "ctrl" and not a.finished:
                    item = a.items[a.pos]
                    blocked.append(f"{a.kind} rank {a.rank} ch {a.channel}: "
                                   f"{getattr(item, 'waits', None) or 'send_sema'}")
            raise ExecError(f"deadlock: ranks {stuck[:8]} unfinished; blocked: {blocked[:6]}")
        left = {k: v for k, v in self.count.items() if v}
        _check(not left, f"semaphores not back at 0: {dict(list(left.items())[:6])}")
        for t, rank, got in self.outputs:
            want = self.refs[t.ordinal].expected_bytes(t.pos(rank))
            if not np.array_equal(got, want):
                ds = t.dsize
                bad = np.flatnonzero((got.reshape(-1, ds) != want.reshape(-1, ds)).any(1))
                raise ExecError(f"trigger {t.ordinal} ({t.label()}) rank {rank}: "
                                f"{bad.size} element(s) differ, first {bad[0]}")
        return {**self.stats, "checked": len(self.outputs)}


def execute(out: str | Path, seed: int = 0, only: set[int] | None = None) -> dict:
    return MeshExec(out, seed, only).run()
