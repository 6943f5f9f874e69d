"""The net-proxy FIFOs (docs/FORMATS.md §8, seed 003 §3), decoded, checked and paired.

Per rank and channel with network traffic: the ``net_ops_info`` records (one per entry that
uses the network on the channel, in entry order), the transmit entries (``net_src_addr``)
and the receive entries (``net_dest_addr``), every op closed by a terminator in each of the
two FIFOs that exists for its entry (the entry's ops carry an entry in it on the channel),
each FIFO one segment per basic block with entries there, ``net_op_idx`` counting from 0 in
each, each ended by an EXEC_COMPLETE entry (docs/FORMATS.md §8 "Basic blocks").  Ops are
keyed by their index in the channel's ``net_ops.bin`` slice here.
The transmit entries of an op pair positionally with the receive entries of the receiver's
op for the same trigger; everything a pairing must agree on is checked here, so the engine
only has to run the transfers (:class:`Transfer`) in FIFO order.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from nrtrewrite.codes import (ENC_MESH_MAX_NUM_EVENTS, EncAlgType, EncMeshEventType, NetAddrMark,
                              SDMA_DATA_TYPE_SIZE)
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import EVT_SEM_INC
from nrtrewrite.errors import SimulationError, escape_controls, json_text
from nrtrewrite.simulate.artifacts import FIFO_FILES, RankFiles, check_fifo_slices
from nrtrewrite.simulate.layout import ADDRESS_ERRORS, E_PAST, Layout
from nrtrewrite.simulate.program import (
    _EVT_BEYOND, _EVT_DEVICE, LEAF_NAMES, POST_RECV, RING_FAMILY, ROLE_RECV, ROLE_SEND,
    SEM_EVENT_BASE, Entry, RankProgram, sem_id, sem_name, zero_shown,
)
from nrtrewrite.simulate.triggers import io_size

#: Per FIFO side, the fields of a net_src_addr (tx) / net_dest_addr (rx) entry that FORMATS
#: §8.2 fixes at 0 on every entry, in offset order (their offsets: the record dtype's).
ZERO_FIELDS = {
    "tx": ("host_addr", "nccl_mhandle", "proxy_histogram_tag", "reserved_52", "dst_mhandle"),
    "rx": ("host_addr", "nccl_mhandle", "reserved_44"),
}
#: The reserved fields of a net_ops_info record (FORMATS §8.1), in offset order.
OPS_RESERVED_FIELDS = ("reserved_4", "reserved_60", "reserved_75")
TRANSFER = int(NetAddrMark.NET_TRANSFER)
#: The values FORMATS §8.1 fixes, written from the document (not the emitter's constants,
#: review 51r): net_idx_loop_size "512 (NET_INDEX_LOOP_SIZE)", initial_send_credits and
#: ending_recv_credits "8 (ours ...)".
NET_INDEX_LOOP_SIZE = 512
NET_INITIAL_SEND_CREDITS = 8
NET_ENDING_RECV_CREDITS = 8
OP_COMPLETE = int(NetAddrMark.NET_OP_COMPLETE)
EXEC_COMPLETE = int(NetAddrMark.EXEC_COMPLETE)
#: The algo types whose ops have variable_peer = 1 (FORMATS §8.1, written from the
#: document: "MESH and RDH"; the mesh family's and both RDH types)
VARIABLE_PEER = {int(a) for a in (EncAlgType.MESH, EncAlgType.SINGLE_STEP_MESH,
                                  EncAlgType.TWO_STEP_POD_MESH, EncAlgType.LATENCY_OPT_MESH,
                                  EncAlgType.BW_OPT_MESH, EncAlgType.INTRA_RDH,
                                  EncAlgType.INTER_RDH)}


@dataclass(slots=True)
class Transfer:
    """One transmit entry (or terminator) as the sender's proxy runs it."""

    rank: int  # sender
    channel: int
    entry: int  # the sender's SPAD entry
    trigger: int
    record: int  # index in net_src.bin
    first: bool  # first entry of a leg: wait send_sema first
    complete: bool  # last entry of a leg: increment the receiver's recv_sema after it
    terminator: bool
    handshake: tuple[int, int]  # (rank, sem id) the proxy decrements
    notify: tuple[int, int] | None  # (rank, sem id) incremented after a complete entry
    src: tuple[int, int, int] | None  # (rank, region, storage offset)
    dst: tuple[int, int, int] | None
    size: int
    receiver: int
    rx_record: int  # the paired net_dest.bin record of the receiver
    rx_entry: int = -1  # the receiver's SPAD entry of that record's op: posted when it starts

    def who(self) -> str:
        kind = "terminator" if self.terminator else "transfer"
        return (f"net proxy {kind} (rank {self.rank} -> {self.receiver}, channel {self.channel}, "
                f"net_src.bin record {self.record})")


_ONE_PEER_RING = (int(EncAlgType.RING), int(EncAlgType.SINGLE_CYCLE_RING))
_ALG_NAMES = {int(a): a.name for a in EncAlgType}


def _ring_op(ent: Entry) -> bool:
    """Whether an entry's ops receive on the channel's ``recv_sema`` (a ring: its consuming
    legs take what arrives), not on an event semaphore (mesh and RDH: ``post_recv`` legs
    post the receives; INTER_RDH is a metaring entry, but its receives land on events)."""
    return ent.algo_type in RING_FAMILY and ent.algo_type != int(EncAlgType.INTER_RDH)


@dataclass
class ChannelFifo:
    rank: int
    channel: int
    ops: np.ndarray
    tx: np.ndarray
    rx: np.ndarray
    tx_raw: np.ndarray
    rx_raw: np.ndarray
    ops_first: int
    tx_first: int
    rx_first: int
    op_entry: list[int] = field(default_factory=list)  # op k -> entry index
    tx_groups: dict[int, tuple[int, int]] = field(default_factory=dict)  # op -> (first, n)
    rx_groups: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: per receive record: the index of the transfer it belongs to (a run of entries ending
    #: with complete = 1) among its SPAD entry's receive transfers on the channel (-1 for a
    #: terminator); and per entry, its receive transfers
    rx_xfer: np.ndarray | None = None
    rx_xfers: dict[int, int] = field(default_factory=dict)
    #: the channel's basic blocks, in order: (basic_block_id, first op, ops), a run of ops
    #: with one basic_block_id each (FORMATS §8 "Basic blocks")
    blocks: list[tuple[int, int, int]] = field(default_factory=list)


def _slices(rf: RankFiles) -> dict[int, tuple[tuple[int, int], ...]]:
    check_fifo_slices(rf.fifo, {name: rf.arrays[name].size for name in FIFO_FILES}, rf.rank)
    return dict(rf.fifo)  # (their types checked when the rank was loaded)


class FifoDecoder:
    """Decode every rank's FIFOs and pair them into :class:`Transfer` lists per sender channel."""

    def __init__(self, layout: Layout, programs: dict[int, RankProgram],
                 files: dict[int, RankFiles], subgraph_index: dict[str, int] | None):
        self.layout = layout
        self.programs = programs
        self.files = files
        self.sg_index = subgraph_index
        self.fifos: dict[tuple[int, int], ChannelFifo] = {}
        self.built = False  # every channel's FIFO read by decode (recv_increments' partial)

    def node(self, rank: int) -> int:
        return self.layout.places[rank].node

    def decode(self) -> dict[tuple[int, int], list[Transfer]]:
        for rank, rf in self.files.items():
            for ch, ((o0, on), (s0, sn), (d0, dn)) in _slices(rf).items():
                a = rf.arrays
                self.fifos[(rank, ch)] = ChannelFifo(
                    rank, ch, a["net_ops.bin"][o0:o0 + on], a["net_src.bin"][s0:s0 + sn],
                    a["net_dest.bin"][d0:d0 + dn], rf.raw("net_src.bin")[s0:s0 + sn],
                    rf.raw("net_dest.bin")[d0:d0 + dn], o0, s0, d0)
        self.built = True
        for f in self.fifos.values():
            self._op_entries(f)
            self._check_ops(f)
            f.tx_groups = self._groups(f, "tx")
            f.rx_groups = self._groups(f, "rx")
        self._check_sends()
        # a post_recv count off only in sum is raised after the pairing and the receiving
        # legs, which name the one leg or entry that carries another transfer's elements
        # (until 2026-12-07 the sum was named at the entry's first post_recv leg)
        summed = self._check_post_recvs()
        transfers = self._pair()
        self._check_receiving_legs(transfers)
        if summed is not None:
            raise summed
        return transfers

    def recv_increments(self, partial: bool = False) -> "dict[tuple, int] | None":
        """The net proxy's increments, (rank, trigger, leg, semaphore id) -> count: +1 on
        the receiving op's ``inc_recv_complete`` semaphore of its own rank after each of the
        op's receive entries with ``complete = 1`` (FORMATS §8.2), by the op's entry.
        ``partial``: after :meth:`decode` failed, the FIFOs it left unsplit are split here
        without its checks; None where one cannot be."""
        out: dict[tuple[int, int, str, int], int] = {}
        if partial:
            if not self.built:
                return None
            for f in self.fifos.values():
                try:
                    if len(f.op_entry) != f.ops.size:
                        self._op_entries(f)
                    if not f.rx_groups and f.rx.size:
                        f.rx_groups = self._groups(f, "rx")
                except SimulationError:
                    return None
        for f in self.fifos.values():
            prog = self.programs[f.rank]
            for k, (first, n) in f.rx_groups.items():
                done = int((f.rx["complete"][first:first + n] == 1).sum())
                if not done:
                    continue
                tr, _win, sid, err = self.layout.resolve_sema(
                    f.rank, np.asarray([f.ops[k]["inc_recv_complete"]]))
                if int(err[0]) or int(tr[0]) != f.rank:
                    continue
                ent = prog.entries[f.op_entry[k]]
                key = (f.rank, ent.trigger.ordinal, ent.leg, int(sid[0]))
                out[key] = out.get(key, 0) + done
        return out

    def _check_post_recvs(self) -> SimulationError | None:
        """FORMATS §3: a ``post_recv`` leg's ``num_elements`` is what it receives.  Posting
        is per entry (§8.2), so the check is per entry and channel: its ``post_recv`` legs
        together receive the bytes of its ops' receive entries.  A receive entry whose size
        alone is off is raised here (:meth:`_blame_receive_size`); a count off otherwise is
        returned, for the caller to raise once the per-transfer checks have had their say."""
        received: dict[tuple[int, int, int], int] = {}  # (rank, channel, entry) -> bytes
        for (rank, ch), f in self.fifos.items():
            for k, (start, n) in f.rx_groups.items():
                key = (rank, ch, f.op_entry[k])
                received[key] = received.get(key, 0) + int(
                    f.rx["size"][start:start + n].astype(np.int64).sum())
        for rank, prog in sorted(self.programs.items()):
            for ent in prog.entries:
                for ch, (first, count) in sorted(ent.queues.items()):
                    idx = np.arange(first, first + count)
                    posts = idx[prog.l_leaf[idx] == POST_RECV]
                    if not posts.size:
                        continue
                    esize = io_size(ent.trigger.dtype)
                    counted = int(prog.l_num[posts].sum()) * esize
                    got = received.get((rank, ch, ent.index), 0)
                    if counted != got:
                        self._blame_receive_size(rank, ch, ent.index, counted, got)
                        return SimulationError(
                            f"the post_recv legs of entry {ent.index} on channel {ch} should "
                            f"count {got} bytes, what its receive entries carry, not {counted} "
                            f"bytes ({int(prog.l_num[posts].sum())} elements) (FORMATS §3: a "
                            "post_recv's num_elements are the elements it receives)",
                            rank=rank, channel=ch,
                            artifact="legs.bin", record=int(posts[0]), field="num_elements")
        return None

    def _blame_receive_size(self, rank: int, ch: int, entry: int, counted: int,
                            got: int) -> None:
        """The post_recv legs of ``entry`` count ``counted`` bytes, its receive entries carry
        ``got``: where one receive entry's size differs from the transmit entry it pairs with
        (FORMATS §8.2: the k-th receive entry from rank s pairs with s's k-th transmit entry to
        this rank on the channel), and the transmit entry's size makes the two counts agree,
        the receive entry is what changed: named (two records against one; until 2026-12-07
        the post_recv legs were).  Otherwise nothing is raised here."""
        f = self.fifos[(rank, ch)]
        seen: dict[int, int] = {}  # sender -> receive entries from it so far on the channel
        odd = []
        for k, (start, n) in sorted(f.rx_groups.items()):
            for j in range(start, start + n):
                sender = int(f.rx["src_rank"][j])
                pos = seen.get(sender, 0)
                seen[sender] = pos + 1
                if f.op_entry[k] != entry:
                    continue
                sf = self.fifos.get((sender, ch))
                if sf is None:
                    return
                tx = [int(sf.tx_first + i) for a, m in sorted(sf.tx_groups.items())
                      for i in range(m[0], m[0] + m[1]) if int(sf.tx["dst_rank"][i]) == rank]
                if pos >= len(tx):
                    return  # unpaired: the pairing names it
                i = tx[pos] - sf.tx_first
                if int(sf.tx["size"][i]) != int(f.rx["size"][j]):
                    odd.append((j, sender, tx[pos], int(sf.tx["size"][i])))
        if len(odd) != 1:
            return
        j, sender, trec, want = odd[0]
        have = int(f.rx["size"][j])
        if got - have + want != counted:
            return
        raise SimulationError(
            f"size should be {want}, not {have}: the paired transmit entry (rank {sender}, "
            f"net_src.bin record {trec}) carries {want} bytes, and the entry's post_recv legs "
            f"count {counted} bytes, what its receive entries carry with {want} here",
            rank=rank, channel=ch, artifact="net_dest.bin", record=f.rx_first + j,
            field="size")

    # ------------------------------------------------------------------
    def _op_entries(self, f: ChannelFifo) -> None:
        """Op k belongs to the rank's entry of trigger ``func_rel_op_idx`` that runs on the
        channel; ops follow the entries' order."""
        prog = self.programs[f.rank]
        f.op_entry = []
        last = -1
        for k, op in enumerate(f.ops):
            trig = int(op["func_rel_op_idx"])
            cand = [e.index for e in prog.entries
                    if e.trigger.ordinal == trig and f.channel in e.channels and e.index >= last]
            if not cand:
                raise SimulationError(f"net op {k}: func_rel_op_idx {trig} names no entry of this "
                                      f"rank on channel {f.channel} (at or after entry {last})",
                                      rank=f.rank, channel=f.channel, artifact="net_ops.bin",
                                      record=f.ops_first + k, field="func_rel_op_idx")
            last = cand[0]
            f.op_entry.append(last)

    def _check_ops(self, f: ChannelFifo) -> None:
        rank, ch = f.rank, f.channel
        prog = self.programs[rank]
        raw = self.files[rank].raw("net_ops.bin")[f.ops_first:f.ops_first + f.ops.size]

        def fail(k, why, fld=None):
            return SimulationError(why, rank=rank, channel=ch, artifact="net_ops.bin",
                                   record=f.ops_first + k, field=fld)

        for k, op in enumerate(f.ops):
            ent = prog.entries[f.op_entry[k]]
            t = ent.trigger
            # FORMATS §8.1's reserved fields, by offset: name the first that is not 0
            for fld in OPS_RESERVED_FIELDS:
                off, size = f.ops.dtype.fields[fld][1], f.ops.dtype[fld].itemsize
                if raw[k, off:off + size].any():
                    raise fail(k, f"{fld} should be {zero_shown(op[fld])}", fld)
            if int(op["sema_shift_offset"]) != ent.sema_shift:
                raise fail(k, f"sema_shift_offset should be {ent.sema_shift}, the entry's, not "
                              f"{int(op['sema_shift_offset'])}", "sema_shift_offset")
            for fld in ("early_send_completion", "early_recv_posting",
                        "is_dynamic_send_recv_sz", "add_to_histogram"):
                if int(op[fld]) != 0:
                    raise fail(k, f"{fld} should be 0, not {int(op[fld])}", fld)
            # FORMATS §8.1: 1 where the peer is resolved per op (MESH, RDH), 0 on the ring
            # family's fixed neighbour
            vp = int(ent.algo_type in VARIABLE_PEER)
            if int(op["variable_peer"]) != vp:
                raise fail(k, f"variable_peer should be {vp}, not {int(op['variable_peer'])}: "
                              f"{_article(_ALG_NAMES.get(ent.algo_type, ent.algo_type))} "
                              "op's peer is "
                              + ("resolved per op" if vp else "the channel's fixed ring "
                                 "neighbour") + " (FORMATS §8.1)", "variable_peer")
            for a, b in (("inc_send_handshake", "inc_send_complete"),
                         ("inc_recv_handshake", "inc_recv_complete")):
                if int(op[a]) != int(op[b]):
                    raise fail(k, f"{b} differs from {a}", b)
            for fld in ("inc_send_handshake", "inc_recv_handshake"):
                tr, win, sid, err = self.layout.resolve_sema(rank, np.array([op[fld]], np.uint64))
                if err[0]:
                    raise fail(k, f"{fld} {int(op[fld]):#x} {ADDRESS_ERRORS[int(err[0])]}", fld)
                # FORMATS §8.1: a ring op receives on the channel's recv_sema; mesh and RDH ops
                # (INTER_RDH is a metaring entry, but its receives land on event semaphores)
                # on the semaphore of their event
                ring_op = _ring_op(ent)
                want = sem_id(ch, ROLE_SEND) if fld == "inc_send_handshake" else (
                    sem_id(ch, ROLE_RECV) if ring_op else int(sid[0]))
                if tr[0] != rank or win[0] != EVT_SEM_INC or sid[0] != want:
                    raise fail(k, f"{fld} should be the INC window of this rank's "
                                  f"{sem_name(want)}, not {sem_name(int(sid[0]))} of rank {tr[0]} "
                                  f"(window {int(win[0]):#x})", fld)
            # FORMATS §8 "Ops": a new op of an entry starts at a receive whose semaphore
            # differs from the current op's, so consecutive ops of an entry differ in it
            if k and f.op_entry[k] == f.op_entry[k - 1] and int(
                    op["inc_recv_complete"]) == int(f.ops[k - 1]["inc_recv_complete"]):
                raise fail(k, f"op {k} receives on the semaphore of op {k - 1} of its entry: "
                              "an op runs until the receives' semaphore changes (FORMATS §8 "
                              "\"Ops\")", "inc_recv_complete")
            if int(op["net_idx_loop_size"]) != NET_INDEX_LOOP_SIZE:
                raise fail(k, f"net_idx_loop_size should be {NET_INDEX_LOOP_SIZE}, not "
                              f"{int(op['net_idx_loop_size'])}", "net_idx_loop_size")
            # FORMATS §8.1 fixes both at 8 (inside the runtime's (0, 0x1FF])
            for fld, want in (("initial_send_credits", NET_INITIAL_SEND_CREDITS),
                              ("ending_recv_credits", NET_ENDING_RECV_CREDITS)):
                if int(op[fld]) != want:
                    raise fail(k, f"{fld} should be {want}, not {int(op[fld])} (FORMATS §8.1)",
                               fld)
            if int(op["data_type_sz"]) != SDMA_DATA_TYPE_SIZE[t.dtype]:
                raise fail(k, f"data_type_sz should be {SDMA_DATA_TYPE_SIZE[t.dtype]}, "
                              f"sdma_data_type_size[{t.dtype.name}], not "
                              f"{int(op['data_type_sz'])}", "data_type_sz")
            bb = self.sg_index.get(t.subgraph) if self.sg_index is not None else None
            if self.sg_index is not None and bb is None:
                # (the engine's kick-word check refuses such a trigger first: reached only
                # through the API, with a subgraph index of another NEFF)
                raise fail(k, f"subgraph {escape_controls(t.subgraph)} (trigger {t.ordinal}'s) "
                              "is not in the rewritten NEFF's subgraphs list, whose index "
                              "basic_block_id holds", "basic_block_id")
            if bb is not None and int(op["basic_block_id"]) != bb:
                raise fail(k, f"basic_block_id should be {bb}, the index of subgraph "
                              f"{escape_controls(t.subgraph)} (trigger {t.ordinal}'s), not "
                              f"{int(op['basic_block_id'])}", "basic_block_id")
            pgta = t.entry_pgta(ent.leg, rank)
            if int(op["unrolled_count"]) != pgta:
                raise fail(k, f"unrolled_count should be {pgta}, the chunk groups of the "
                              f"{'leg' if t.legs else 'trigger'}, not {int(op['unrolled_count'])}",
                           "unrolled_count")
            if int(op["enc_channel"]) != ch:
                raise fail(k, f"enc_channel should be {ch}, its FIFO's channel, not "
                              f"{int(op['enc_channel'])}",
                           "enc_channel")
        # FORMATS §8 "Basic blocks": the channel's ops are one run per basic block, in block
        # order (the triggers' order: subgraphs in the subgraphs list's order)
        bb = f.ops["basic_block_id"].astype(np.int64)
        starts = np.flatnonzero(np.append(True, bb[1:] != bb[:-1])) if bb.size else bb
        runs = np.diff(np.append(starts, bb.size))
        f.blocks = [(int(bb[a]), int(a), int(m)) for a, m in zip(starts, runs)]
        for (b0, _a0, _m0), (b1, a1, _m1) in zip(f.blocks, f.blocks[1:]):
            if b1 < b0:
                raise fail(a1, f"basic_block_id {b1} after block {b0}: a channel's ops run "
                               "block by block, in block order (FORMATS §8 \"Basic blocks\")",
                           "basic_block_id")

    @staticmethod
    def _blame_op_index(ents: np.ndarray, term_idx: int, start: int, i: int, first0: int,
                        counts: np.ndarray, cnt_field: str, fail,
                        bounds: tuple[int, int] = (-1, -1)) -> None:
        """The ``net_op_idx`` of the entries ``start..i-1`` of a FIFO and of their terminator
        ``i`` disagree (FORMATS §8.2: an op's entries and its terminator carry its index):
        name the record that breaks the rule (review 57i; until 2026-12-07 the terminator
        was named whenever it differed from the first entry, and entries only after the
        op's count, so a terminator deleted or moved named an untouched record).

        * one record differs from all the others (three or more): it is named;
        * the entries change from op a to b at one point, and the terminator (and all the
          entries after that point) carry b: op a's terminator is missing there, and the
          first entry of b is named, "inside op a";
        * one entry and its terminator (two values): ``bounds`` (lo, hi), the op before's
          index and the next terminator's (or the channel's op count), hold the op between
          them (§8.2: ops in order, each once); the entry is named when only the terminator's
          value fits (review 57o: the untouched terminator was named).

        Returns otherwise (the caller's lines stand)."""
        vals = [int(v) for v in ents["net_op_idx"]] + [term_idx]
        if len(set(vals)) == 1:
            return
        rest = vals[1:]
        lo, hi = bounds
        if len(vals) == 2 and lo < term_idx < hi and not lo < vals[0] < hi:
            raise fail(start, f"net_op_idx {vals[0]} inside op {term_idx}: its terminator "
                              f"(record {first0 + i}) carries {term_idx}, and ops run in order, "
                              f"each once: after {'no op' if lo < 0 else f'op {lo}'} and "
                              f"before {hi}, it fits, {vals[0]} does not (FORMATS §8.2: an "
                              "op's entries carry its index)", "net_op_idx")
        if len(vals) >= 3:
            for j, v in enumerate(vals):
                others = set(vals[:j] + vals[j + 1:])
                if len(others) == 1 and v not in others:
                    k = others.pop()
                    if j == len(vals) - 1:
                        return  # the terminator: the caller's line
                    m = len(vals) - 2
                    raise fail(start + j, f"net_op_idx {v} inside op {k}: the op's other "
                                          f"{m} entr{'y' if m == 1 else 'ies'} and its "
                                          f"terminator (record {first0 + i}) carry {k} "
                                          "(FORMATS §8.2: an op's entries carry its index)",
                               "net_op_idx")
        a = vals[0]
        j = next(x for x, v in enumerate(rest, 1) if v != a)
        b = vals[j]
        if j < len(vals) - 1 and all(v == b for v in vals[j:]):
            have = (f"; op {a}'s {cnt_field} is {int(counts[a])}"
                    if 0 <= a < counts.size else "")
            raise fail(start + j, f"net_op_idx {b} inside op {a}: the {j} entries before it "
                                  f"carry {a}, and no terminator closes op {a} before this "
                                  f"entry of op {b} (FORMATS §8.2: each op's entries end with "
                                  f"its NET_OP_COMPLETE terminator){have}", "net_op_idx")

    def _groups(self, f: ChannelFifo, side: str) -> dict[int, tuple[int, int]]:
        """Split a FIFO into per-op groups, each closed by an exact terminator; the groups
        keyed by the op's index in the channel's ``net_ops.bin`` slice.

        FORMATS §8 "Basic blocks": the FIFO is one segment per basic block of the channel
        that has a transmit (receive) op, i.e. an op with ``tx_entry_cnt``
        (``rx_entry_cnt``) > 0, in block order, each ending with one EXEC_COMPLETE entry;
        ``net_op_idx`` counts the ops of its segment's block from 0."""
        recs = f.tx if side == "tx" else f.rx
        raw = f.tx_raw if side == "tx" else f.rx_raw
        name = "net_src.bin" if side == "tx" else "net_dest.bin"
        first0 = f.tx_first if side == "tx" else f.rx_first
        rank_field = "dst_rank" if side == "tx" else "src_rank"
        cnt_field = "tx_entry_cnt" if side == "tx" else "rx_entry_cnt"

        def fail(i, why, fld=None):
            return SimulationError(why, rank=f.rank, channel=f.channel, artifact=name,
                                   record=first0 + i, field=fld)

        groups: dict[int, tuple[int, int]] = {}
        term_at: dict[int, int] = {}  # op -> its terminator's index in the FIFO
        i = 0
        n = recs.size
        prev = -1
        # every terminator's and every EXEC_COMPLETE entry's record, once (review 57v: a
        # scan of the rest of the FIFO per op for the next one made this ops x records)
        terms = np.flatnonzero(recs["mark"] == OP_COMPLETE)
        execs = np.flatnonzero(recs["mark"] == EXEC_COMPLETE)
        # the blocks with a segment here: an op of theirs has entries in this FIFO
        cnts = f.ops[cnt_field]
        segs = [blk for blk in f.blocks if cnts[blk[1]:blk[1] + blk[2]].any()]
        op_entry = np.asarray(f.op_entry, np.int64)
        uses = np.isin(op_entry, op_entry[cnts > 0])  # the op's entry has this FIFO
        sb = 0  # the current segment's index in segs
        seg_terms = 0  # terminators in the current segment so far
        extra_exec = None  # an EXEC_COMPLETE entry past the segments (raised last)
        seg_start = 0  # the current segment's first record

        def shape(a, m):
            """Block (a, m)'s ops that use this FIFO, as their entry counts (net_ops.bin)."""
            return tuple(int(c) for j, c in enumerate(cnts[a:a + m]) if uses[a + j])

        @functools.cache
        def permuted():
            """Review 59q: whether the whole FIFO is the blocks' segments in another order
            (each block's stored counts met by one segment, each segment used once), a swap;
            only then is a segment of another block's shape named as moved (else an edited
            count or a lost EXEC_COMPLETE entry is named as before)."""
            if execs.size != len(segs) or (execs.size and int(execs[-1]) != n - 1):
                return False
            cuts = np.append(-1, execs)
            found = [_closes(recs["mark"][lo:hi]) for lo, hi in zip(cuts[:-1] + 1, cuts[1:])]
            own = [shape(a, m) for _b, a, m in segs]
            return found != own and sorted(found) == sorted(own)

        def moved_segment(bid):
            """Review 59j: where the segment from ``seg_start`` to its EXEC_COMPLETE entry,
            as entries per terminator, is not block ``bid``'s shape but another block's with
            a segment here, it is named: the net_ops.bin counts agree with the FIFO's
            segments in another order, so the segments moved, not a count (until 2026-12-07
            the untouched count, or the first record past the op count, was named)."""
            if bid not in (b for b, _a, _m in segs):
                return
            end = int(np.searchsorted(execs, seg_start))
            end = int(execs[end]) if end < execs.size else n
            got = _closes(recs["mark"][seg_start:end])
            own = next(shape(a, m) for b, a, m in segs if b == bid)
            if got == own:
                return None
            if not permuted():
                return
            fit = [b for b, a, m in segs if b != bid and shape(a, m) == got]
            if not fit:
                return
            other = fit[0]
            raise fail(seg_start,
                       f"block {bid}'s segment (records {first0 + seg_start}-{first0 + end}) "
                       f"has the shape of block {other}'s: its ops close after "
                       f"{', '.join(map(str, got))} entries, what block {other}'s ops count "
                       f"({cnt_field}), not block {bid}'s {', '.join(map(str, own))}: the "
                       "segments run one per block, in block order (FORMATS §8 \"Basic "
                       f"blocks\"), and this one is block {other}'s", "mark")

        def closing_fields(j, what):
            """Record j, a terminator or an EXEC_COMPLETE entry (``what``): size 0, the rank
            field -1, every other byte but net_op_idx and mark 0 (FORMATS §8.2, "Basic
            blocks")."""
            rec = recs[j]
            if int(rec["size"]) != 0:
                raise fail(j, f"{what} size should be 0, not {int(rec['size'])}", "size")
            if int(rec[rank_field]) != -1:
                raise fail(j, f"{what} {rank_field} should be -1, not {int(rec[rank_field])}",
                           rank_field)
            stray = _stray_field(side, raw[j], rank_field)
            if stray is not None:
                raise fail(j, f"{what} has non-zero bytes besides net_op_idx, mark and the "
                              f"rank field: {stray[1]} should be 0", stray[0])

        def _skipped(j):
            """Where segment j follows blocks without entries here (FORMATS §8 "Basic
            blocks": no segment for them), a note naming them; else ''."""
            lo = segs[j - 1][0] if 0 < j <= len(segs) else -1
            hi = segs[j][0] if j < len(segs) else None
            gone = [(b, m) for b, _a, m in f.blocks if lo < b and (hi is None or b < hi)]
            if not gone:
                return ""
            ids = ", ".join(str(b) for b, _m in gone)
            ops = sum(m for _b, m in gone)
            many = len(gone) > 1
            return (f"; block{'s' if many else ''} {ids}, whose segment{'s' if many else ''} "
                    f"would stand here, ha{'ve' if many else 's'} no {name} entries on the "
                    f"channel ({cnt_field} 0 on {'all' if ops > 1 else 'its'} {ops} op"
                    f"{'s' if ops > 1 else ''}), so {'they get' if many else 'it gets'} no "
                    "segment and no EXEC_COMPLETE entry")

        def block_of(j):
            """Segment j's block (basic_block_id, first op, ops); past the blocks with
            entries here, the channel's next blocks (records there are terminators of ops
            whose FIFO does not exist, named by the existence check below)."""
            if j < len(segs):
                return segs[j]
            after = [blk for blk in f.blocks if not segs or blk[0] > segs[-1][0]]
            j -= len(segs)
            return after[j] if j < len(after) else None

        while i < n:
            start = i
            if i == seg_start and sb < len(segs) and permuted():
                # a segment moved: named at its first record, before its ops are read as
                # its block's (review 59q F5: a moved segment whose first op matched its
                # block's count was named at that op's peers, func_rel_op_idx)
                moved_segment(segs[sb][0])
            while i < n and int(recs["mark"][i]) == TRANSFER:
                i += 1
            blk = block_of(sb)
            if blk is None:
                raise fail(start, f"records after the last segment's EXEC_COMPLETE entry (mark "
                                  f"{int(recs['mark'][start])}, net_op_idx "
                                  f"{int(recs['net_op_idx'][start])}): {len(f.blocks)} basic "
                                  "block(s) on the channel, each at most one segment (FORMATS "
                                  "§8 \"Basic blocks\")", "mark")
            bid, base, nb = blk
            if i >= n:
                raise fail(n - 1, "entries after the last terminator: the op is not closed "
                                  "by a terminator (proxy_end_operation)", "mark")
            term = recs[i]
            ents = recs[start:i]
            # a 0-byte entry first: a terminator whose mark was lost reads as one, and is
            # named here rather than at the next terminator, which would then close two ops
            bad = np.flatnonzero((ents["size"] == 0) | (ents["complete"] < 0)
                                 | (ents["complete"] > 1))
            if bad.size:
                j = int(bad[0])
                hint = (" (a terminator without its NET_OP_COMPLETE mark?)"
                        if int(ents["size"][j]) == 0 and int(ents[rank_field][j]) == -1 else "")
                raise fail(start + j, f"entry with size 0 or complete not 0/1{hint}", "size")
            if int(term["mark"]) == EXEC_COMPLETE:
                if i > start:
                    raise fail(i, f"an EXEC_COMPLETE entry right after entries (records "
                                  f"{first0 + start}-{first0 + i - 1}): their op is not closed "
                                  "by its NET_OP_COMPLETE terminator (proxy_end_operation) "
                                  "before its block's segment ends", "mark")
                if sb >= len(segs) and extra_exec is None:
                    extra_exec = fail(
                        i, f"an EXEC_COMPLETE entry after the last segment: {len(segs)} basic "
                           f"block(s) of the channel have ops with {name} entries "
                           f"({cnt_field} > 0), each one segment (FORMATS §8 \"Basic "
                           "blocks\")", "mark")
                if not seg_terms:
                    raise fail(i, f"an EXEC_COMPLETE entry closes block {bid}'s segment, which "
                                  "holds no terminator: a segment holds its block's "
                                  "terminators, then one EXEC_COMPLETE entry (FORMATS §8 "
                                  "\"Basic blocks\")" + _skipped(sb), "mark")
                # every op of the block whose entry uses this FIFO is closed before the
                # segment ends (review 59j: an EXEC_COMPLETE entry moved before the last op's
                # terminator, where that op has no entries here, was taken as the block's end
                # and the terminator as the next block's)
                # (only where that terminator follows it, so the entry was moved; a
                # terminator missing, or an op's count raised, is named as before: at the op
                # without its terminator, or at the count)
                open_ = [j for j in range(nb) if uses[base + j] and base + j not in groups]
                if open_ and i + 1 < n and int(recs["mark"][i + 1]) == OP_COMPLETE and int(
                        recs["net_op_idx"][i + 1]) == open_[0]:
                    j = open_[0]
                    where = f"stands before op {j}'s terminator (record {first0 + i + 1})"
                    raise fail(i, f"an EXEC_COMPLETE entry ends block {bid}'s segment while "
                                  f"op {j} of the block (op {base + j} of its net_ops.bin "
                                  f"slice) is not closed: it {where}; the FIFO exists for "
                                  f"the op's entry {f.op_entry[base + j]}, so every op of "
                                  "the entry is closed by its terminator before the block's "
                                  "EXEC_COMPLETE entry (FORMATS §8 \"Terminator\", \"Basic "
                                  "blocks\")", "mark")
                if int(term["net_op_idx"]) != nb - 1:
                    raise fail(i, f"EXEC_COMPLETE net_op_idx should be {nb - 1}, block {bid}'s "
                                  f"last op ({nb} op(s) on the channel, counted from 0), not "
                                  f"{int(term['net_op_idx'])}", "net_op_idx")
                closing_fields(i, "EXEC_COMPLETE entry")
                sb, seg_terms, prev = sb + 1, 0, -1
                i += 1
                seg_start = i
                continue
            k = int(ents["net_op_idx"][0]) if ents.size else int(term["net_op_idx"])
            if int(term["mark"]) != OP_COMPLETE:
                raise fail(i, f"mark {int(term['mark'])}: a FIFO entry is NET_TRANSFER (0), a "
                              "NET_OP_COMPLETE (1) terminator or a segment's EXEC_COMPLETE (2) "
                              "entry", "mark")
            restart = (prev >= 0 and int(term["net_op_idx"]) == 0
                       and not ents["net_op_idx"].any())
            if prev == nb - 1 or restart:
                moved_segment(bid)
                # the block's ops are all closed, or the records start over at op 0: where
                # block bid's segment should have ended
                raise fail(start, f"mark {int(recs['mark'][start])}, net_op_idx "
                                  f"{int(recs['net_op_idx'][start])} after op {prev}'s "
                                  f"terminator (record {first0 + start - 1}) of block {bid} "
                                  f"({nb} op(s) on the channel): block {bid}'s segment should "
                                  "end here with its EXEC_COMPLETE (2) entry, ops counting "
                                  "from 0 in each block (FORMATS §8 \"Basic blocks\")", "mark")
            # the op due next: the block's next op whose entry has this FIFO; records that
            # carry its channel-wide index instead (the count before 2026-12-07) are named
            due = next((j for j in range(prev + 1, nb) if uses[base + j]), None)
            if base and due is not None and k == base + due and not (
                    ents["net_op_idx"] != k).any() and int(term["net_op_idx"]) == k:
                raise fail(start, f"net_op_idx {k} is op {due} of block {bid}'s index on the "
                                  f"whole channel (op {base + due} of its net_ops.bin slice): "
                                  f"it should be {due}, ops counting from 0 in each basic "
                                  "block's segment (FORMATS §8 \"Basic blocks\")", "net_op_idx")
            # a lone terminator whose net_op_idx skips the op due, which has no entries here
            # (its terminator stands alone), to an op that has: the terminator's index is
            # named, not the later op's count (review 59q F3: until 2026-12-08 op k's
            # untouched tx_entry_cnt / rx_entry_cnt was named "should be 0")
            k_t = int(term["net_op_idx"])
            if (not ents.size and due is not None and due < k_t < nb
                    and not int(cnts[base + due]) and int(cnts[base + k_t])):
                raise fail(i, f"terminator net_op_idx should be {due}, not {k_t}: op {due} of "
                              f"block {bid} is due (ops appear in order, each once), its "
                              f"entry {f.op_entry[base + due]} uses the FIFO and it has no "
                              f"entries here ({cnt_field} 0), so its terminator stands alone, "
                              f"as this one does; op {k_t}'s {cnt_field} is "
                              f"{int(cnts[base + k_t])} (FORMATS §8 \"Terminator\", §8.2)",
                           "net_op_idx")
            # the next terminator after i, if in this segment (before its EXEC_COMPLETE entry)
            nxt = int(np.searchsorted(terms, i, side="right"))
            nex = int(np.searchsorted(execs, i, side="right"))
            hi = (int(recs["net_op_idx"][terms[nxt]]) if nxt < terms.size and (
                nex >= execs.size or terms[nxt] < execs[nex]) else nb)
            self._blame_op_index(ents, int(term["net_op_idx"]), start, i, first0,
                                 cnts[base:base + nb], cnt_field, fail, (prev, hi))
            if int(term["net_op_idx"]) != k:
                raise fail(i, f"terminator net_op_idx should be {k}, the op it closes (count of "
                              f"its block's net_ops_info so far - 1), not "
                              f"{int(term['net_op_idx'])}", "net_op_idx")
            if not prev < k < nb:
                raise fail(start, f"net_op_idx {k}: ops appear in order, each once, counted "
                                  f"from 0 in each basic block, and block {bid} has {nb} on the "
                                  f"channel (ops {base}-{base + nb - 1} of its net_ops.bin "
                                  "slice; FORMATS §8 \"Basic blocks\")", "net_op_idx")
            prev = k
            seg_terms += 1
            k_rel, k = k, base + k
            closing_fields(i, "terminator")
            if ents.size != int(f.ops[cnt_field][k]):
                moved_segment(bid)
                # (named where the count is, op k's net_ops.bin record: until 2026-12-06 at
                # the terminator's record of this FIFO, which has no such field)
                raise SimulationError(
                    f"{cnt_field} of op {k} should be {ents.size}, the entries before its "
                    f"terminator in {name}, not {int(f.ops[cnt_field][k])}", rank=f.rank,
                    channel=f.channel, artifact="net_ops.bin", record=f.ops_first + k,
                    field=cnt_field)
            bad = np.flatnonzero(ents["net_op_idx"] != k_rel)
            if bad.size:
                raise fail(start + int(bad[0]), f"net_op_idx should be {k_rel}, its op's, not "
                                                f"{int(ents['net_op_idx'][bad[0]])}", "net_op_idx")
            if ents.size and int(ents["complete"][-1]) != 1:
                raise fail(i - 1, "the last entry of an op does not have complete = 1", "complete")
            # the fields FORMATS §8.2 fixes at 0 on every entry, by offset: name the first
            spans = [(recs.dtype.fields[fld][1], recs.dtype[fld].itemsize)
                     for fld in ZERO_FIELDS[side]]
            nonzero = np.stack([raw[start:i, off:off + size].any(axis=1)
                                for off, size in spans], axis=1)
            bad = np.flatnonzero(nonzero.any(axis=1))
            if bad.size:
                j = start + int(bad[0])
                fld = ZERO_FIELDS[side][int(np.argmax(nonzero[bad[0]]))]
                raise fail(j, f"{fld} should be {zero_shown(recs[fld][j])}", fld)
            peers = ents[rank_field]
            bad = np.flatnonzero([(p not in self.layout.places)
                                  or self.node(int(p)) == self.node(f.rank) for p in peers])
            if bad.size:
                raise fail(start + int(bad[0]), f"{rank_field} {int(peers[bad[0]])} is not a "
                                                "rank on another node (the FIFOs carry network "
                                                "transfers only)", rank_field)
            # the peer is a rank of the op's trigger (whose ring or mesh it sends along):
            # checked here, on each side alone, so a changed rank field is named where it is,
            # not at the entry it then pairs with
            ent = self.programs[f.rank].entries[f.op_entry[k]]
            t = ent.trigger
            if not self._peers_fit(ent, f.channel, side, peers):
                # the op's entry comes from net_ops.bin's func_rel_op_idx: where the peers fit
                # another entry of the channel, that byte may be the changed one
                other = next((e for e in self.programs[f.rank].entries
                              if e is not ent and f.channel in e.channels
                              and self._peers_fit(e, f.channel, side, peers)), None)
                if other is not None:
                    shown = ", ".join(str(int(p)) for p in np.unique(peers))
                    raise SimulationError(
                        f"func_rel_op_idx {t.ordinal} puts op {k} in entry {ent.index} (trigger "
                        f"{t.ordinal}, leg {ent.leg}), which the {rank_field} {shown} of its "
                        f"{name} records {first0 + start}-{first0 + i - 1} does not fit, "
                        f"and entry {other.index} (trigger {other.trigger.ordinal}, leg "
                        f"{other.leg}) it fits: "
                        f"func_rel_op_idx or {rank_field} is wrong, and nothing else read "
                        "tells which", rank=f.rank, channel=f.channel, artifact="net_ops.bin",
                        record=f.ops_first + k, field="func_rel_op_idx")
            bad = np.flatnonzero(~np.isin(peers, list(t.group)))
            if bad.size:
                raise fail(start + int(bad[0]), f"{rank_field} {int(peers[bad[0]])} should be a "
                                                f"rank of trigger {t.ordinal}'s replica_group, "
                                                f"{list(t.group)}, whose op {k} the entry is of",
                           rank_field)
            peer = self._ring_peer(ent, f.channel, side)
            bad = np.flatnonzero(peers != peer) if peer is not None else ()
            if len(bad):
                who = "successor" if side == "tx" else "predecessor"
                raise fail(start + int(bad[0]), f"{rank_field} should be {peer}, rank "
                                                f"{f.rank}'s ring {who} on channel {f.channel} "
                                                f"(a {_ALG_NAMES[ent.algo_type]} op sends to "
                                                "its successor and receives from its "
                                                f"predecessor), not {int(peers[bad[0]])}",
                           rank_field)
            groups[k] = (start, i - start)
            term_at[k] = i
            i += 1
        if sb < len(segs):
            bid = segs[sb][0]
            raise fail(n - 1 if n else 0,
                       f"the FIFO ends without block {bid}'s EXEC_COMPLETE entry: "
                       f"{len(segs)} basic block(s) of the channel have ops with {name} "
                       f"entries ({cnt_field} > 0), each one segment ending with one "
                       "(FORMATS §8 \"Basic blocks\")", "mark")
        missing = [k for k in range(f.ops.size) if k not in groups]  # ops without entries
        for k in missing:
            if int(f.ops[cnt_field][k]):
                raise SimulationError(f"op {k}: {cnt_field} should be 0, not "
                                      f"{int(f.ops[cnt_field][k])}: the "
                                      f"{'transmit' if side == 'tx' else 'receive'} FIFO has no "
                                      "entries for it", rank=f.rank, channel=f.channel,
                                      artifact="net_ops.bin", record=f.ops_first + k,
                                      field=cnt_field)
        # proxy_end_operation terminates the op in each FIFO that exists for it (seed 003 §3,
        # §4 NOTE); a FIFO exists for an entry when the entry's ops carry an entry in it
        # (FORMATS §8 "Terminator"): then every op of the entry has its terminator there
        which = "transmit" if side == "tx" else "receive"
        op_entry = np.asarray(f.op_entry, np.int64)
        closed = np.zeros(f.ops.size, bool)  # ops with a terminator here
        closed[list(groups)] = True
        exists = np.isin(op_entry, op_entry[f.ops[cnt_field] > 0])  # the op's entry uses it
        bad = np.flatnonzero(exists != closed)
        if bad.size:
            k = int(bad[0])
            e = int(op_entry[k])
            # the op as the FIFO numbers it, from 0 in its block (FORMATS §8 "Basic blocks"),
            # and as the channel's net_ops.bin slice does
            bid, a = next((b, a) for b, a, m in f.blocks if a <= k < a + m)
            opname = f"op {k - a} of block {bid} (op {k} of its net_ops.bin slice)"
            if exists[k]:
                raise SimulationError(
                    f"{opname} has no terminator in the {which} FIFO ({name}): the FIFO "
                    f"exists for its entry {e} on the channel (the entry's ops carry entries "
                    "there), so proxy_end_operation closes every op of the entry there, an op "
                    "without entries by its terminator alone", rank=f.rank, channel=f.channel,
                    artifact=name,
                    record=first0 + self._missing_at(f, term_at, k),
                    field="mark")
            raise fail(groups[k][0] + groups[k][1],
                       f"{opname} has a terminator in the {which} FIFO, but its entry {e} "
                       "carries no entry there on this channel, so the FIFO does not exist for "
                       "it and holds no terminator of its ops", "mark")
        if extra_exec is not None:
            raise extra_exec
        return groups

    @staticmethod
    def _missing_at(f: ChannelFifo, term_at: dict[int, int], k: int) -> int:
        """Where op ``k``'s missing terminator belongs in a FIFO: after the terminator of
        the op before it that has one, and after that op's segment's EXEC_COMPLETE entry
        when that op is of an earlier block."""
        before = [j for j in term_at if j < k]
        if not before:
            return 0
        j = max(before)
        block = {op: b for b, a, m in f.blocks for op in range(a, a + m)}
        return term_at[j] + 1 + (block.get(j) != block.get(k))

    def _peers_fit(self, ent: Entry, ch: int, side: str, peers: np.ndarray) -> bool:
        """Whether an op of ``ent`` may have these peers on ``ch``: ranks of its trigger's
        replica_group, and on a RING or SINGLE_CYCLE_RING entry its ring successor (``tx``)
        or predecessor (``rx``)."""
        if not np.isin(peers, list(ent.trigger.group)).all():
            return False
        peer = self._ring_peer(ent, ch, side)
        return peer is None or bool((peers == peer).all())

    def _ring_peer(self, ent: Entry, ch: int, side: str) -> int | None:
        """The one rank a RING or SINGLE_CYCLE_RING entry's transmit (``tx``) or receive
        FIFO on ``ch`` talks to: its successor or predecessor on the channel's ring (a
        SINGLE_CYCLE_RING CCW channel's order is its CW ring backward); None for the other
        engines, whose peers vary."""
        if ent.algo_type not in _ONE_PEER_RING:
            return None
        leg = ent.leg if ent.trigger.legs else None
        if side == "tx":
            return ent.trigger.successor(ch, ent.rank, leg)
        for r in ent.trigger.group:
            if ent.trigger.successor(ch, r, leg) == ent.rank:
                return r
        return None

    def _check_sends(self) -> None:
        """Each leg's send_sema increments hand the proxy exactly the legs (runs ending with
        complete = 1) its transmit entries carry; ring_send_complete <=> the entry transmits."""
        for rank, prog in self.programs.items():
            tx_entries: dict[int, bool] = {}
            for ent in prog.entries:
                for ch in ent.channels:
                    first, count = ent.queues.get(ch, (0, 0))
                    sends = int(prog.l_proxy_sends[first:first + count].sum())
                    f = self.fifos.get((rank, ch))
                    runs = 0
                    if f is not None:
                        for k, (start, n) in f.tx_groups.items():
                            if f.op_entry[k] == ent.index:
                                runs += int(f.tx["complete"][start:start + n].sum())
                                tx_entries[ent.index] = tx_entries.get(ent.index, False) or n > 0
                    if sends != runs and f is not None:
                        self._complete_off(f, ent, sends, runs)
                    if sends != runs:
                        raise SimulationError(
                            f"entry {ent.index} channel {ch}: the legs hand {sends} transfer(s) to "
                            f"the net proxy (send_sema increments), the transmit FIFO carries "
                            f"{runs}", rank=rank, channel=ch, trigger=ent.trigger.ordinal,
                            artifact="net_src.bin")
                if tx_entries.get(ent.index, False) != ent.send_complete:
                    raise SimulationError(
                        f"ring_send_complete should be {int(bool(tx_entries.get(ent.index)))}, "
                        f"not {int(ent.send_complete)}: the entry "
                        f"{'sends' if tx_entries.get(ent.index) else 'does not send'} over the "
                        "network", rank=rank, artifact="spad.bin", record=ent.index,
                        field="ring_send_complete")

    def _complete_off(self, f: ChannelFifo, ent: Entry, sends: int, runs: int) -> None:
        """The legs of ``ent`` hand ``sends`` transfers to the proxy and its transmit entries
        on ``f`` end ``runs`` (entries with complete = 1). Where exactly |sends - runs| of
        them disagree with the receive entry each pairs with (FORMATS §8.2: the k-th
        transmit entry of r to P with the k-th receive entry of P from r; §8: both carry the
        transfer's ``complete``), each the way the legs' count says (0 where the legs hand
        more, 1 where fewer), the first is named at its ``complete`` (since 2026-12-08, fixer
        59p after review 59n: the count was named at net_src.bin without a record)."""
        rank, ch = f.rank, f.channel
        rx_index: dict[int, list[tuple[ChannelFifo, int]]] = {}
        seen: dict[int, int] = {}
        odd: list[tuple[int, int, ChannelFifo, int]] = []
        for k, (start, n) in sorted(f.tx_groups.items()):
            for j in range(start, start + n):
                recv = int(f.tx["dst_rank"][j])
                pos = seen.get(recv, 0)
                seen[recv] = pos + 1
                if f.op_entry[k] != ent.index:
                    continue
                rf = self.fifos.get((recv, ch))
                if rf is None:
                    return
                if recv not in rx_index:
                    rx_index[recv] = [(rf, i) for _k, (s0, m) in sorted(rf.rx_groups.items())
                                      for i in range(s0, s0 + m)
                                      if int(rf.rx["src_rank"][i]) == rank]
                if pos >= len(rx_index[recv]):
                    return
                _rf, i = rx_index[recv][pos]
                got, want = int(f.tx["complete"][j]), int(rf.rx["complete"][i])
                if got != want:
                    if want != int(sends > runs):
                        return  # the other way from the legs' count: not told here
                    odd.append((j, want, rf, i))
        if len(odd) != abs(sends - runs):
            return
        j, want, rf, i = odd[0]
        raise SimulationError(
            f"complete should be {want}, not {1 - want}: the legs of entry {ent.index} hand "
            f"{sends} transfer(s) to the net proxy (send_sema increments), the transmit FIFO "
            f"carries {runs}, and the receive entry it pairs with (rank {rf.rank}, net_dest.bin "
            f"record {rf.rx_first + i}) has complete {want} (FORMATS §8.2)", rank=rank,
            channel=ch, trigger=ent.trigger.ordinal, artifact="net_src.bin",
            record=f.tx_first + j, field="complete")

    # ------------------------------------------------------------------
    def _pair(self) -> dict[tuple[int, int], list[Transfer]]:
        """FORMATS §8.2: on channel c, the k-th transmit entry of r whose dst_rank is P pairs
        with the k-th receive entry of P whose src_rank is r."""
        rx_index: dict[tuple[int, int, int], list[tuple[int, int]]] = {}
        for (rank, ch), f in sorted(self.fifos.items()):
            for k, (start, n) in sorted(f.rx_groups.items()):
                for j in range(start, start + n):
                    rx_index.setdefault((rank, ch, int(f.rx["src_rank"][j])), []).append((k, j))
        used: dict[tuple[int, int, int], int] = {}
        out: dict[tuple[int, int], list[Transfer]] = {}
        for (rank, ch), f in sorted(self.fifos.items()):
            prog = self.programs[rank]
            lst: list[Transfer] = []
            hs = (rank, sem_id(ch, ROLE_SEND))
            sent: dict[int, int] = {}  # entry -> its complete transfers so far (in order)
            ends: dict[int, np.ndarray] = {}  # entry -> its legs' sends, summed (_sender)
            for k, (start, n) in sorted(f.tx_groups.items()):
                ent = prog.entries[f.op_entry[k]]
                t = ent.trigger
                tx = f.tx[start:start + n]
                # a dev_addr running past its region waits for its pair's check: a size the
                # sending leg does not bear out is named there, at its size (until 2026-12-07
                # at dev_addr, the check's other records at size)
                srcs, past = self._resolve(rank, rank, tx["dev_addr"], tx["size"],
                                           "net_src.bin", f.tx_first + start, "dev_addr",
                                           kind="gw", defer_past=True)
                prev_complete = True
                for j in range(n):
                    rec = f.tx_first + start + j
                    recv = int(tx["dst_rank"][j])
                    key = (recv, ch, rank)
                    pos = used.get(key, 0)
                    cands = rx_index.get(key, [])
                    if pos >= len(cands):
                        raise SimulationError(f"transmit entry to rank {recv} has no receive entry "
                                              f"of rank {recv} on channel {ch} to pair with (rank "
                                              f"{recv} receives {len(cands)} from rank {rank})",
                                              rank=rank, channel=ch, artifact="net_src.bin",
                                              record=rec, trigger=t.ordinal)
                    used[key] = pos + 1
                    rk, rj = cands[pos]
                    rf = self.fifos[(recv, ch)]
                    rt = self.programs[recv].entries[rf.op_entry[rk]].trigger
                    if rt is not t:
                        raise SimulationError(f"pairs with a receive entry of trigger {rt.ordinal} "
                                              f"(rank {recv}, net_dest.bin record "
                                              f"{rf.rx_first + rj})", rank=rank, channel=ch,
                                              artifact="net_src.bin", record=rec,
                                              trigger=t.ordinal)
                    comp = bool(tx["complete"][j])
                    whole = prev_complete and comp  # the entry is its transfer, whole
                    self._check_pair(f, rf, rec, tx[j], rf.rx[rj], recv, rf.rx_first + rj,
                                     self._sender(prog, ent, ch, sent.get(ent.index, 0), ends)
                                     if whole and _ring_op(ent) else None)
                    if past is not None and past[0] == j:
                        raise past[1]
                    sent[ent.index] = sent.get(ent.index, 0) + comp
                    dst = self._resolve(recv, recv, rf.rx["dev_addr"][rj:rj + 1],
                                        rf.rx["size"][rj:rj + 1], "net_dest.bin",
                                        rf.rx_first + rj, "dev_addr")
                    notify = None
                    if comp:
                        tr, _w, sid, _e = self.layout.resolve_sema(
                            recv, np.array([rf.ops["inc_recv_complete"][rk]], np.uint64))
                        notify = (int(tr[0]), int(sid[0]))
                    lst.append(Transfer(rank, ch, ent.index, t.ordinal, rec, prev_complete, comp,
                                        False, hs, notify,
                                        (int(srcs[0][j]), int(srcs[1][j]), int(srcs[2][j])),
                                        (int(dst[0][0]), int(dst[1][0]), int(dst[2][0])),
                                        int(tx["size"][j]), recv, rf.rx_first + rj,
                                        rf.op_entry[rk]))
                    prev_complete = comp
                lst.append(Transfer(rank, ch, ent.index, t.ordinal, f.tx_first + start + n, False,
                                    False, True, hs, None, None, None, 0, -1, -1))
            if lst:
                out[(rank, ch)] = lst
        for key, cands in rx_index.items():
            if used.get(key, 0) != len(cands):
                recv, ch, sender = key
                k, j = cands[used.get(key, 0)]
                rf = self.fifos[(recv, ch)]
                raise SimulationError(f"receive entry from rank {sender} has no transmit entry "
                                      f"of rank {sender} on channel {ch} to pair with", rank=recv,
                                      channel=ch, artifact="net_dest.bin", record=rf.rx_first + j)
        return out

    # ------------------------------------------------------------------
    def _check_receiving_legs(self, transfers: dict[tuple[int, int], list[Transfer]]) -> None:
        """The legs at both ends of a mesh or RDH entry's network transfers (a *transfer*: a
        run of FIFO entries ending with ``complete = 1``, one leg's bytes for one receiver):

        * FORMATS §3.2 / §8 "Entries": each ``post_recv`` leg posts the receive of one
          transfer, the entry's post_recv legs and its receive transfers in the same order,
          and it carries that transfer's element range: the ``elem_start`` and
          ``num_elements`` of the leg that sent it (its sender's legs hand the proxy their
          transfers in program order, one per ``send_sema`` increment), its bytes the
          transfer's;
        * FORMATS §8.1: an op's ``inc_recv_complete`` (= ``inc_recv_handshake``) names the
          event semaphore its receives land on, the one the legs that take its data wait
          for: the first leg after the op's post_recv legs that reads bytes its receives
          wrote waits that semaphore; when no leg of the entry reads them (an output), a
          leg after them waits it.

        A ring entry's receives are its consuming legs' (recv_sema; Ring pairing,
        docs/SIMULATOR.md §2)."""
        for f in self.fifos.values():
            f.rx_xfer = np.full(f.rx.size, -1, np.int64)
            f.rx_xfers = {}
            for k, (start, n) in sorted(f.rx_groups.items()):
                e = f.op_entry[k]
                comp = f.rx["complete"][start:start + n].astype(np.int64)
                f.rx_xfer[start:start + n] = f.rx_xfers.get(e, 0) + np.cumsum(comp) - comp
                f.rx_xfers[e] = f.rx_xfers.get(e, 0) + int(comp.sum())
        # the post_recv legs of every mesh / RDH (entry, channel), in program order
        posts: dict[tuple[int, int, int], np.ndarray] = {}
        for rank, prog in sorted(self.programs.items()):
            for ent in prog.entries:
                if _ring_op(ent):
                    continue
                for ch, (first, count) in sorted(ent.queues.items()):
                    idx = np.arange(first, first + count)
                    p = idx[prog.l_leaf[idx] == POST_RECV]
                    posts[(rank, ent.index, ch)] = p
                    f = self.fifos.get((rank, ch))
                    got = f.rx_xfers.get(ent.index, 0) if f is not None else 0
                    if p.size == got:
                        continue
                    why = (f"{p.size} post_recv leg(s) on channel {ch}, its ops receive {got} "
                           "transfer(s) there (FORMATS §3.2: a post_recv posts the receive of "
                           "one transfer)")
                    if p.size > got:  # the first post_recv leg without a transfer to post
                        raise SimulationError(
                            f"entry {ent.index} has {why}", rank=rank, channel=ch,
                            artifact="legs.bin", record=int(p[got]), field="leaf")
                    # post_recv legs post the transfers in order: the first transfer without
                    # one is transfer p.size; named by its first receive entry, with the
                    # entry's legs
                    j = _first_receive(f, ent.index, int(p.size))
                    raise SimulationError(
                        f"receive entry from rank {int(f.rx['src_rank'][j])} has no post_recv "
                        f"leg: entry {ent.index} (legs.bin records [{first}, {first + count})) "
                        f"has {why}", rank=rank, channel=ch, artifact="net_dest.bin",
                        record=f.rx_first + j)
        for (rank, ch), lst in sorted(transfers.items()):
            self._check_transfer_ends(rank, ch, lst, posts)
        for _key, f in sorted(self.fifos.items()):
            self._check_recv_semaphores(f, posts)

    def _check_transfer_ends(self, rank: int, ch: int, lst: list[Transfer],
                             posts: dict[tuple[int, int, int], np.ndarray]) -> None:
        """A transfer's sending leg and the receiver's post_recv carry the same elements."""
        prog = self.programs[rank]
        sent: dict[int, int] = {}  # entry -> transfers so far
        ends: dict[int, np.ndarray] = {}  # entry -> cumulative send_sema increments of its legs
        nbytes = 0
        for tr in lst:
            if tr.terminator:
                continue
            nbytes += tr.size
            if not tr.complete:
                continue
            i = sent.get(tr.entry, 0)
            sent[tr.entry] = i + 1
            size, nbytes = nbytes, 0
            recv = self.programs[tr.receiver]
            rent = recv.entries[tr.rx_entry]
            if _ring_op(rent):
                continue
            rf = self.fifos[(tr.receiver, ch)]
            x = int(rf.rx_xfer[tr.rx_record - rf.rx_first])
            post = int(posts[(tr.receiver, tr.rx_entry, ch)][x])
            first, count = prog.entries[tr.entry].queues.get(ch, (0, 0))
            if tr.entry not in ends:
                ends[tr.entry] = np.cumsum(prog.l_proxy_sends[first:first + count])
            # the legs hand their transfers to the proxy in program order (_check_sends
            # counted them): transfer i is the leg's whose increments cover it
            leg = first + int(np.searchsorted(ends[tr.entry], i, side="right"))
            pe, pn = int(recv.l_elem[post]), int(recv.l_num[post])
            se, sn = int(prog.l_elem[leg]), int(prog.l_num[leg])
            where = dict(rank=tr.receiver, channel=ch, artifact="legs.bin", record=post)
            if (pe, pn) != (se, sn):
                raise SimulationError(
                    f"post_recv of elements [{pe}, {pe + pn}) receives the transfer of rank "
                    f"{rank}'s {_leg_name(prog, leg)} of "
                    f"elements [{se}, {se + sn}) (its legs.bin record {leg}, net_src.bin record "
                    f"{tr.record}): a post_recv carries the element range of the transfer it "
                    "receives (FORMATS §8 \"Entries\")",
                    field="elem_start" if pe != se else "num_elements", **where)
            esize = io_size(rent.trigger.dtype)
            if size != pn * esize:
                raise SimulationError(
                    f"post_recv of {pn} elements ({pn * esize} bytes) receives a transfer of "
                    f"{size} bytes (rank {rank}'s net_src.bin record {tr.record}, complete)",
                    field="num_elements", **where)

    def _check_recv_semaphores(self, f: ChannelFifo,
                               posts: dict[tuple[int, int, int], np.ndarray]) -> None:
        """FORMATS §8.1: a mesh / RDH op's receives land on the semaphore its data's legs wait
        for (:meth:`_check_receiving_legs`)."""
        rank, ch = f.rank, f.channel
        prog = self.programs[rank]
        # FORMATS §8.1: an op without receive entries (its entry's only op on the channel:
        # every later op starts at a receive, §8 "Ops") names the channel's recv_sema, as a
        # ring op does (_check_ops holds ring ops to it); _groups made rx_entry_cnt the count
        recv_sema = sem_id(ch, ROLE_RECV)
        # each op's semaphore (its address _check_ops checked)
        sems = self.layout.resolve_sema(rank, f.ops["inc_recv_complete"])[2]
        for k in np.flatnonzero(f.ops["rx_entry_cnt"] == 0).tolist():
            if _ring_op(prog.entries[f.op_entry[k]]):
                continue
            if int(sems[k]) != recv_sema:
                raise SimulationError(
                    f"op {k} has no receive entries and names {sem_name(int(sems[k]))} "
                    f"(inc_recv_complete); an op without receives names this rank's "
                    f"{sem_name(recv_sema)}, as a ring op does (FORMATS §8.1)", rank=rank,
                    channel=ch, artifact="net_ops.bin", record=f.ops_first + k,
                    field="inc_recv_complete")
        for k, (start, n) in sorted(f.rx_groups.items()):
            ent = prog.entries[f.op_entry[k]]
            if not n or _ring_op(ent):
                continue
            sem = int(sems[k])
            xs = f.rx_xfer[start:start + n]
            mine = posts[(rank, ent.index, ch)][int(xs.min()):int(xs.max()) + 1]
            first, count = ent.queues[ch]
            after = int(mine.max()) + 1  # the legs after the op's post_recv legs
            end = first + count
            rx = f.rx[start:start + n]
            trank, reg, soff, _e = self.layout.resolve_data(rank, rx["dev_addr"],
                                                            rx["size"].astype(np.int64))
            reader = _first_reader(prog, after, end, rank, reg, soff,
                                   rx["size"].astype(np.int64))
            first_leg, legs = (reader, 1) if reader is not None else (after, end - after)
            if (rank, sem) in prog.waits_of(first_leg, legs):
                continue
            what = (f"the first leg to read bytes they land on, {_leg_name(prog, reader)} "
                    f"(legs.bin record {reader}), waits "
                    + (", ".join(sem_name(s) for s in sorted(
                        {sid for r, sid in prog.waits_of(reader, 1) if r == rank}))
                       or "no semaphore")
                    if reader is not None else
                    "no leg of the entry after its post_recv legs waits it (and none reads "
                    "the bytes they land on)")
            if reader is not None:
                self._moved_wait(f, k, sem, ent, reader)
            raise SimulationError(
                f"op {k}'s receives land on {sem_name(sem)} (inc_recv_complete), but {what}: "
                "an op names the event its receives land on, the one the legs that take its "
                "data wait for (FORMATS §8.1)", rank=rank, channel=ch, artifact="net_ops.bin",
                record=f.ops_first + k, field="inc_recv_complete")

    def _moved_wait(self, f: ChannelFifo, k: int, sem: int, ent: Entry, g: int) -> None:
        """Op ``k``'s receives land on ``sem``, which leg ``g`` (the first to read their
        bytes) does not wait. Where the leg waits another semaphore ``x`` of its rank instead,
        ``sem`` gets one more than its waits take and ``x`` one less (the legs of the
        trigger's entry on every rank and the net proxy's receives, FORMATS §7, §8.2), and
        FORMATS §7 lets the network land on ``sem`` and not on ``x`` (:func:`_net_lands`:
        the counts alone are alike for an op's semaphore changed and a wait changed), the
        leg's wait is named, not the op: its 0xBF word, with the sem.bin wait, where the
        wait is the leg's first (the one its word carries, FORMATS §4) and the word waits
        ``x`` too (a second wait is left to the op: no multi-node output at hand has one; since
        2026-12-08, fixer 59p after review 59n: a wait moved alike in sem.bin and its 0xBF
        word was named at the untouched inc_recv_complete)."""
        from nrtrewrite.simulate.program import EventHold, _event_balance
        rank = f.rank
        prog = self.programs[rank]
        s0, sc = int(prog.l_sem_first[g]), int(prog.l_sem_count[g])
        waits = [s0 + i for i in range(sc) if prog.s_wait[s0 + i]]
        net = self.recv_increments()
        for j in waits:
            x = int(prog.s_sid[j])
            if int(prog.s_rank[j]) != rank or x == sem:
                continue
            h = EventHold(rank=rank, trigger=int(ent.trigger.ordinal), leg_name=ent.leg, leg=g,
                          word=-1, bd=j, bd_sid=x, bd_val=int(prog.s_val[j]), word_sid=sem,
                          word_val=int(prog.s_val[j]), leaf=_leg_name(prog, g),
                          net_sids=frozenset({sem}), word_error=None)
            bal = _event_balance(self.programs, h, {sem, x}, net)
            if bal is None:
                return
            inc, wait = bal
            v = int(prog.s_val[j])
            if inc[sem] != wait[sem] + v or inc[x] != wait[x] - v:
                continue
            if not _net_lands(ent, sem, x):  # the counts alike either way: FORMATS §7 tells
                return
            why = (f"{sem_name(sem)} of rank {rank} gets {inc[sem]} from the legs of trigger "
                   f"{h.trigger}'s entry on all its ranks and the net proxy's receives (op {k}, "
                   f"net_ops.bin record {f.ops_first + k}: its inc_recv_complete; FORMATS "
                   f"§8.2), and its waits here take {wait[sem]}; {sem_name(x)} gets {inc[x]}, "
                   f"and its waits here take {wait[x]}")
            rf = self.files[rank]
            word = int(rf.arrays["legs.bin"]["sb2sb_first"][g])
            n_words = int(rf.arrays["legs.bin"]["sb2sb_count"][g])
            if j == waits[0] and n_words and int(rf.arrays["sb2sb.bin"]["wait_idx"][word]) == x:
                raise SimulationError(
                    f"wait_idx should be {sem}, not {x}: {why} ({h.leaf} leg, legs.bin record "
                    f"{g}), and the leg's first wait (sem.bin record {j}) is on {sem_name(x)} "
                    "too", rank=rank, artifact="sb2sb.bin", record=word, field="wait_idx")
            return

    @staticmethod
    def _sender(prog: RankProgram, ent: Entry, ch: int, i: int,
                ends: dict[int, np.ndarray]) -> tuple[int, int, int] | None:
        """The leg of ``ent`` on channel ``ch`` that hands transfer ``i`` (0 the first) to the
        proxy (its send_sema increments, in program order: _check_sends counted them) and
        its num_elements and element size (the transfer's bytes), where that leg hands
        exactly one transfer (FORMATS §8 "Entries": a ring leg's data is one transfer); else
        None.  ``ends``: entry -> the cumulative send_sema increments of its legs on ``ch``,
        filled here once per entry (until 2026-12-07 summed again for every transfer)."""
        first, count = ent.queues.get(ch, (0, 0))
        if ent.index not in ends:
            ends[ent.index] = np.cumsum(prog.l_proxy_sends[first:first + count])
        g = first + int(np.searchsorted(ends[ent.index], i, side="right"))
        if g >= first + count or int(prog.l_proxy_sends[g]) != 1:
            return None
        return g, int(prog.l_num[g]), io_size(ent.trigger.dtype)

    def _check_pair(self, f, rf, rec, tx, rx, recv, rx_rec, sender=None) -> None:
        """The two entries of a pair agree (FORMATS §8.2). Their addresses and ``complete``
        are fixed by nothing read before this, so a disagreement names both records and
        fields; a ``size`` where the transmit entry is a whole transfer of a ring-family
        leg (``sender``: the leg and its bytes, :meth:`_sender`) is held to those bytes,
        and the side that differs from them is named (until 2026-12-07 both were)."""
        where = dict(rank=f.rank, channel=f.channel, artifact="net_src.bin", record=rec)
        there = f"the paired receive entry (rank {recv}, net_dest.bin record {rx_rec})"
        if sender is not None and int(tx["size"]) != int(rx["size"]):
            g, num, esize = sender
            nbytes = num * esize
            leg = (f"rank {f.rank}'s {_leg_name(self.programs[f.rank], g)} leg (legs.bin "
                   f"record {g}), num_elements {num} x {esize} = {nbytes} bytes")
            if int(tx["size"]) == nbytes:
                raise SimulationError(
                    f"size should be {nbytes}, not {int(rx['size'])}: the paired transmit entry "
                    f"(rank {f.rank}, net_src.bin record {rec}) carries the whole transfer of "
                    f"{leg}", rank=recv, channel=f.channel, artifact="net_dest.bin",
                    record=rx_rec, field="size")
            if int(rx["size"]) == nbytes:
                raise SimulationError(
                    f"size should be {nbytes}, not {int(tx['size'])}: this entry is the whole "
                    f"transfer of {leg}, as {there} says", field="size", **where)
        for mine, theirs in (("dst_addr", "dev_addr"), ("size", "size"),
                             ("complete", "complete")):
            a, b = int(tx[mine]), int(rx[theirs])
            if a != b:
                shown = (lambda v: f"{v:#x}") if mine == "dst_addr" else str
                raise SimulationError(
                    f"{mine} {shown(a)} here and {theirs} {shown(b)} in {there} should be "
                    "equal: one of the two records is wrong, and nothing else read tells which",
                    field=mine, **where)

    def _resolve(self, issuer, owner, addr, size, artifact, rec0, fld, kind=None,
                 defer_past=False):
        """The (rank, region, offset) of each record's bytes; the first record whose address
        is not one (of ``owner``'s, in a region of ``kind``) is raised.  With ``defer_past``
        a first such record that only runs past its region's end is returned instead, with
        its error, as ``(trank, reg, soff), (j, error)`` (else ``..., None``): its size may
        be what is wrong, and the caller checks it first."""
        trank, reg, soff, err = self.layout.resolve_data(issuer, addr, size.astype(np.int64))
        routed = (np.asarray(addr, np.uint64) >> np.uint64(47)) != 0
        for j in range(addr.size):
            why = None
            if routed[j]:
                why = f"{fld} {int(addr[j]):#x} is not a local SoC address"
            elif err[j]:
                why = (f"{fld} {int(addr[j]):#x} ({int(size[j])} bytes) "
                       f"{ADDRESS_ERRORS[int(err[j])]}")
            elif trank[j] != owner:
                why = (f"{fld} {int(addr[j]):#x} should be in rank {owner}'s window, not rank "
                       f"{trank[j]}'s")
            elif kind and self.layout.region(int(reg[j])).kind != kind:
                why = (f"{fld} {int(addr[j]):#x} is in region "
                       f"{json_text(self.layout.region(int(reg[j])).name)}; the proxy sends "
                       "from the gateway buffer")
            if why:
                e = SimulationError(why, rank=issuer, artifact=artifact, record=rec0 + j,
                                    field=fld)
                if defer_past and not routed[j] and err[j] == E_PAST:
                    return (trank, reg, soff), (j, e)
                raise e
        return ((trank, reg, soff), None) if defer_past else (trank, reg, soff)


def _first_receive(f: ChannelFifo, entry: int, xfer: int = 0) -> int:
    """The index in ``f.rx`` of the first receive entry of transfer ``xfer`` (0 the first;
    ``f.rx_xfer`` numbers them) of SPAD entry ``entry``'s ops."""
    return min(start + int(np.argmax(f.rx_xfer[start:start + n] == xfer))
               for k, (start, n) in f.rx_groups.items()
               if f.op_entry[k] == entry and (f.rx_xfer[start:start + n] == xfer).any())


#: events the network never lands on (FORMATS §7: handshakes only go to peers on the same
#: node, EVT_REDUCE_WRITE is a label without semaphore traffic)
_NOT_NET = frozenset(int(e) for e in (
    EncMeshEventType.EVT_SYNC, EncMeshEventType.EVT_GLOBAL_HNDSHK,
    EncMeshEventType.EVT_LOCAL_HNDSHK, EncMeshEventType.EVT_REDUCE_WRITE,
    EncMeshEventType.EVT_RDH_LOCAL_HANDSHAKE))
_MESH = frozenset({int(EncAlgType.MESH), int(EncAlgType.SINGLE_STEP_MESH)})


def _net_lands(ent: Entry, sem: int, x: int) -> bool:
    """Whether FORMATS §7 lets the net proxy's receives land on event semaphore ``sem`` and
    not on ``x`` of a leg of ``ent``: ``x`` outside the event window, or a handshake or
    label event, or, on a MESH or SINGLE_STEP_MESH entry, ``sem`` the other devices' or
    nodes' data event and ``x`` the same device's."""
    t, u = sem - SEM_EVENT_BASE, x - SEM_EVENT_BASE
    if not 0 <= t < ENC_MESH_MAX_NUM_EVENTS or t in _NOT_NET:
        return False
    if not 0 <= u < ENC_MESH_MAX_NUM_EVENTS or u in _NOT_NET:
        return True
    return ent.algo_type in _MESH and t in _EVT_BEYOND and u in _EVT_DEVICE


def _leg_name(prog: RankProgram, g: int) -> str:
    return str(LEAF_NAMES.get(int(prog.l_leaf[g]), int(prog.l_leaf[g])))


def _first_reader(prog: RankProgram, lo: int, hi: int, rank: int, reg: np.ndarray,
                  off: np.ndarray, size: np.ndarray) -> int | None:
    """The first of legs [lo, hi) of ``prog`` with a source run on ``rank`` that overlaps
    one of the byte ranges [off, off + size) of regions ``reg``; None if none does."""
    if lo >= hi:
        return None
    r0 = int(prog.l_run_first[lo])
    r1 = int(prog.l_run_first[hi - 1] + prog.l_run_count[hi - 1])
    R = prog.runs
    sl = slice(r0, r1)
    src = (R["dir"][sl] == 0) & (R["rank"][sl] == rank)
    if not src.any():
        return None
    # the byte ranges as keys (region, offset) on one line, merged, sorted
    a = reg.astype(np.int64) * (1 << 44) + off
    b = a + size
    order = np.argsort(a, kind="stable")
    a, b = a[order], np.maximum.accumulate(b[order])
    run_a = R["reg"][sl][src].astype(np.int64) * (1 << 44) + R["off"][sl][src]
    run_b = run_a + R["len"][sl][src]
    # the last range starting before a run ends overlaps it if it ends after the run starts
    # (ranges are sorted by start, their ends made non-decreasing: an overlap anywhere
    # shows there)
    i = np.searchsorted(a, run_b, side="left") - 1
    hit = (i >= 0) & (b[np.maximum(i, 0)] > run_a)
    if not hit.any():
        return None
    return int(R["leg"][sl][src][hit].min())


def _closes(marks: np.ndarray) -> tuple[int, ...]:
    """A segment's records (their ``mark``) as the entries before each of its terminators
    (FORMATS §8.2: an op's entries, then its NET_OP_COMPLETE terminator)."""
    ends = np.flatnonzero(marks == OP_COMPLETE)
    return tuple((np.diff(ends, prepend=-1) - 1).tolist())


def _stray_field(side: str, row: np.ndarray, rank_field: str) -> tuple[str, str] | None:
    """The first field, by offset, of a terminator's or an EXEC_COMPLETE entry's bytes
    ``row`` (``side`` "tx": net_src_addr, else net_dest_addr) that is not zero, but for
    net_op_idx, mark and ``rank_field`` (FORMATS §8.2): its name and its bytes, e.g.
    ``("dev_addr", "dev_addr (bytes 8..15)")``; None where every other byte is 0.  Until
    2026-12-07 such a byte was named at a field ``terminator``, which neither record has."""
    layout = F.NET_SRC_ADDR_DTYPE if side == "tx" else F.NET_DEST_ADDR_DTYPE
    for name, (dt, at) in sorted(((n, v[:2]) for n, v in layout.fields.items()),
                                 key=lambda item: item[1][1]):
        if name in ("net_op_idx", "mark", rank_field):
            continue
        if row[at:at + dt.itemsize].any():
            return name, f"{name} (bytes {at}..{at + dt.itemsize - 1})"
    return None


def _article(word: str) -> str:
    """``word`` with its indefinite article: "an INTER_RDH", "a MESH"."""
    return ("an " if str(word)[:1].upper() in "AEIOU" else "a ") + str(word)
