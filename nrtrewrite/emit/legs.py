"""EMIT + COMPLETE: the leg IR of SPAD entries -> legs, 0xBF words, BDs, CCE, semaphores, FIFOs.

One call of :func:`emit_entries` turns the leg IR (:mod:`nrtrewrite.compose.ir`)
of consecutive SPAD entries on one rank into records appended to a
:class:`RankBuilder` (the same records as one call per entry).  It is the only
emitter: every algorithm composes into the IR.
Everything is vectorised over the legs with numpy; nothing is built one Python
object per descriptor.

A *leg* is one leaf call.  Its data moves as *tiles* (one packet each: seed 000
§3.4); each tile has one stream per source (M2S BDs) and one per destination
(S2M BDs), a BD per contiguous run; a reduce tile also has one CCE descriptor
per source.  Semaphores (seed 000 §4.1-4.2), per leg, in this order:

* the IR's waits: ``wait_ge_and_dec(sem, value)`` (subop 20) on the rank's own core;
* ``inc(dma_compl_sema)`` on its own core (LOCAL: source release), always;
* the IR's increments (REMOTE: data ready, routed by the target's device id);
  one aimed at a peer across the network becomes ``inc(send_sema)`` on the
  rank's own core, and the net proxy increments the receiver;

and each channel closes with a ``mark_end`` leg: ``wait_ge_and_dec(dma_compl_sema,
<number of legs>)``, the counted barrier that also returns it to zero.

Seed names: this module is the runtime's host SB2SB encoder family, vectorised (seed 000
§3.2: ``__encd_dma_common_sb2sb`` looping the active channels and branching on
``reduce_mode``: ``encd_dma_copy_sb2sb`` -> ``__encd_dma_copy`` -> ``add_dma_packet`` for a
copy leg, ``encd_dma_reduce_copy_sb2sb`` -> ``__encd_dma_reduce_copy`` ->
``add_dma_packet_cce`` for a reduce leg), and the device packers the mesh and RDH leaves
hand off to (seed 003: ``encd_dma_copy``, ``encd_dma_reduce_copy``, ``encd_mesh_memcopy``;
``enc_primitive_mesh::send`` chooses ``encd_mesh_memcopy`` or ``encd_mesh_memcopy_sb2sb`` per
destination, and here every data leg is carried by SB2SB words, docs/FORMATS.md §4).
A leg's ``reduce_mode`` is the IR's ``reduce`` column: a reduce leg gets CCE descriptors
beside its BDs, with its entry's ``cce_op`` (the SDMA_CCETYPE the ring composer passes as
``data_op_type``, seed 001 §4).
"""

from __future__ import annotations

import functools
import hashlib
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from nrtrewrite.codes import (
    DType, EdgeLocality, EncdNeigh, EvtSemSubop, NetAddrMark, Opcode, SDMA_DATA_TYPE_SIZE, SdmaOp,
)
from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.ir import MAX_DST, MAX_INC, MAX_SRC, MAX_WAIT, NO_VIEW
from nrtrewrite.compose.leaves import Leaf, leaf_name
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.address import (
    EVT_SEM_BASE, EVT_SEM_DEC, EVT_SEM_INC, SEM_CHANNEL_BASE, SEM_ENTRY_DONE, SEM_ENTRY_POST,
    SEM_COMPL, SEM_RECV, SEM_SEND, SEMS_PER_CHANNEL,
    MemoryMap, channel_sem, route, sema_address,
)
from nrtrewrite.emit.buffers import BufferView, ViewList
from nrtrewrite.emit.tiling import cce_dtype_nibbles, io_code, tile_elements
from nrtrewrite.emit.tiling import expand as _expand
from nrtrewrite.errors import LimitError, LoweringError
from nrtrewrite import threads

#: Slot numbers of the IR's source, destination and increment arrays.
_SLOT_INDEX = np.arange(max(MAX_SRC, MAX_DST, MAX_INC))
#: sem.bin role byte of a semaphore outside the ring channel block.
ROLE_OTHER = 0xFF


@dataclass(frozen=True)
class Peer:
    rank: int
    device: int  # routing id of its device
    logical_core: int  # index of the core on its device (TOP_SP / window)
    node: int


@dataclass
class ChannelState:
    """Running per-channel counters of one rank across the whole program."""

    bd_count: int = 0  # data BDs queued so far (generation tag)
    sem_count: int = 0  # semaphore BDs queued so far
    ops: list = field(default_factory=list)  # net_ops_info records, one array per op
    #: per op, the SPAD entry (``spad_index``) it belongs to
    entry: list = field(default_factory=list)
    #: per op, its basic block (``basic_block_id``) and its net_op_idx: its place among its
    #: block's ops on the channel (docs/FORMATS.md §8 "Basic blocks")
    block: list = field(default_factory=list)
    idx: list = field(default_factory=list)
    #: per op, its net_src_addr / net_dest_addr entries (without terminator), or ``None``
    #: when the op has no legs in that FIFO (:meth:`fifo` adds the terminators of the ops
    #: of every entry whose FIFO exists)
    src: list = field(default_factory=list)
    dest: list = field(default_factory=list)

    def fifo(self, side: str) -> list[np.ndarray]:
        """The channel's records of one FIFO file (``side`` "src" or "dest"), in op order.

        proxy_end_operation pushes a terminator into each FIFO that *exists* for the op
        (``if next.src_addr_fifo`` / ``if self.dest_addr_fifo``, seed 003 §3), whether or
        not the op has entries there; ``next.src_addr_fifo`` is non-null exactly when the
        forward target is across the network (seed 003 §4 NOTE).  Our reading
        (docs/FORMATS.md §8 "Terminator"): a FIFO exists for a SPAD entry on the channel
        when the entry's ops carry at least one entry in it; then every op of that entry is
        closed by a terminator there (an op without entries by its terminator alone), and
        the ops of an entry without entries in the FIFO have none.

        The file is one segment per basic block (the runtime's per-block
        neuronStartNetworkProxy call): a block whose ops put any record here ends its
        segment with one EXEC_COMPLETE entry (docs/FORMATS.md §8 "Basic blocks"); a block
        without any has no segment."""
        per_op = self.src if side == "src" else self.dest
        closed, seg_end = self._closings(per_op)
        if not closed.any():
            return []
        dtype, rank_field = ((F.NET_SRC_ADDR_DTYPE, "dst_rank") if side == "src"
                             else (F.NET_DEST_ADDR_DTYPE, "src_rank"))
        term = _terminators(dtype, self.idx, rank_field)
        out = []
        for k, entries in enumerate(per_op):
            if entries is not None:
                out.append(entries)
            if closed[k]:
                out.append(term[k:k + 1])
            if seg_end[k]:
                out.append(_exec_complete(dtype, self.idx[k], rank_field))
        return out

    def fifo_count(self, side: str) -> int:
        """The number of records :meth:`fifo` gives (without building them)."""
        per_op = self.src if side == "src" else self.dest
        closed, seg_end = self._closings(per_op)
        return (sum(a.size for a in per_op if a is not None) + int(closed.sum())
                + int(seg_end.sum()))

    def _closings(self, per_op: list) -> tuple[np.ndarray, np.ndarray]:
        """Per op of one FIFO (:attr:`src` or :attr:`dest`): whether a terminator closes it
        there (its SPAD entry's FIFO exists, :meth:`_exists`), and whether its block's
        segment ends after it with the EXEC_COMPLETE entry (it is its block's last op, and
        an op of the block has a terminator there)."""
        has = self._exists(per_op)
        closed = np.fromiter((e in has for e in self.entry), bool, len(self.entry))
        if not closed.size:
            return closed, closed
        block = np.asarray(self.block, np.int64)
        last = np.append(block[1:] != block[:-1], True)
        run = np.cumsum(np.append(False, last[:-1]))  # each op's block run
        seg_end = last & (np.bincount(run, closed, run.size) > 0)[run]
        return closed, seg_end

    def _exists(self, per_op: list) -> set[int]:
        """The SPAD entries for which a FIFO (its ops' entries, :attr:`src` or
        :attr:`dest`) exists on the channel."""
        return {e for e, a in zip(self.entry, per_op) if a is not None}


@dataclass
class EntryContext:
    """Everything :func:`emit_entries` needs about one SPAD entry on one rank."""

    rank: int
    trigger: int
    spad_index: int
    dtype: DType
    cce_op: int  # SDMA_CCETYPE (0 for copies)
    views: list[BufferView]  # indexed by the IR's view numbers
    gw_view: int  # the gateway staging view (network sends)
    peers: list[Peer]  # indexed by the IR's peer numbers; 0 is this rank
    localities: list[EdgeLocality]  # from this rank to each peer
    lnc_fmt: int
    num_active_channels: int
    subgraph_index: int
    groups: int  # pgta, recorded as unrolled_count
    #: the platform's hardware generation: the CCE element cap of its reduce tiles
    #: (``Platform.hw_generation``; seed 000 §3.4)
    hw_generation: int
    sema_shift_offset: int = 0  # the entry's event window (mesh entries), net_ops_info+0
    #: net_ops_info's variable_peer: the entry's ops resolve their peer per op (MESH and
    #: RDH algo types), not the channel's fixed ring neighbour (docs/FORMATS.md §8.1)
    variable_peer: int = 0
    #: peers (indices into ``peers``) of the entry handshake; None = every same-node peer.
    #: Must be symmetric across ranks: P in r's set exactly when r is in P's.
    sync_peers: list[int] | None = None
    #: the semaphore the entry handshake counts posts on: SEM_ENTRY_POST or another of
    #: nrtrewrite.entryslots.ENTRY_POST_SEMS (the trigger's slot, the same on every rank)
    entry_post_sem: int = SEM_ENTRY_POST
    #: ``peers`` and ``localities`` as arrays (built from them when None; the lowering
    #: reuses one per peer table)
    peer_tables: PeerTables | None = None

    @property
    def me(self) -> Peer:
        return self.peers[0]

    def tables(self) -> PeerTables:
        if self.peer_tables is None:
            self.peer_tables = PeerTables.of(self.peers, self.localities)
        return self.peer_tables


@dataclass(frozen=True)
class PeerTables:
    """An entry's peer table as arrays, indexed by the IR's peer numbers."""

    net: np.ndarray  # bool: across the network from peer 0
    core: np.ndarray  # the base of the peer's core window
    bits: np.ndarray  # routing bits of the peer's device, seen from peer 0
    logical_core: np.ndarray
    rank: np.ndarray

    @property
    def offset(self) -> np.ndarray:
        """SoC offset of each peer's window: core base plus routing bits (disjoint bits)."""
        return self.core | self.bits

    @classmethod
    def of(cls, peers: list[Peer], localities: list[EdgeLocality]) -> PeerTables:
        n, me = len(peers), peers[0].device
        return cls(
            net=np.fromiter((loc == EdgeLocality.NETWORK for loc in localities), bool, n),
            core=np.fromiter((core_base(p) for p in peers), np.int64, n),
            bits=np.fromiter((route_bits(p.device, me) for p in peers), np.int64, n),
            logical_core=np.fromiter((p.logical_core for p in peers), np.int64, n),
            rank=np.fromiter((p.rank for p in peers), np.int64, n))


#: Arrays below this size are joined with the batch's other small arrays of their file
#: before hashing and writing (fewer calls, each taking the GIL from the lowering thread).
COALESCE_BYTES = 64 << 10


def _coalesced(batch: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
    """The batch's arrays, the small ones of each file joined (as raw bytes, padding
    included) into one array at the place of the file's first small one; each file keeps
    its order, which is all a file's bytes depend on."""
    groups: list[tuple[str, list[np.ndarray]]] = []  # (file, arrays joined into one)
    open_run: dict[str, list[np.ndarray]] = {}  # file -> its current run of small arrays
    for name, arr in batch:
        if arr.nbytes >= COALESCE_BYTES:
            open_run.pop(name, None)  # a big array ends the file's small run
            groups.append((name, [arr]))
        elif name in open_run:
            open_run[name].append(arr)
        else:
            open_run[name] = [arr]
            groups.append((name, open_run[name]))
    return [(name, arrs[0] if len(arrs) == 1 else
             np.frombuffer(b"".join(a.tobytes() for a in arrs), arrs[0].dtype))
            for name, arrs in groups]


def _timed_update(h, arr: np.ndarray) -> float:
    """Hash ``arr``'s bytes into ``h``; the seconds it took (``RankBuilder.hash_s``)."""
    t0 = time.perf_counter()
    h.update(arr.data)
    return time.perf_counter() - t0


def end_queue(q: queue.Queue, timeout: float = 1.0) -> None:
    """Drop what waits in ``q`` and put the ``None`` that ends its thread, without blocking
    on its lock for more than ``timeout`` seconds: a failed run's cleanup, where a signal's
    exception may have left the lock held (then the thread, a daemon, stays blocked)."""
    if q.mutex.acquire(timeout=timeout):
        try:
            q.queue.clear()
            q.queue.append(None)
            q.not_empty.notify()
        finally:
            q.mutex.release()


class _Consumer:
    """A thread that hashes each appended array into its file's SHA-256 and hands it to the
    sink, in append order.  At most QUEUE_DEPTH batches wait (bounded memory).  ``hash_s``:
    its seconds in the SHA-256 updates."""

    QUEUE_DEPTH = 32

    def __init__(self, hashes: dict, sink: Callable[[str, np.ndarray], None] | None):
        self.hashes, self.sink = hashes, sink
        self.queue: queue.Queue = queue.Queue(maxsize=self.QUEUE_DEPTH)
        self.error: BaseException | None = None
        self.hash_s = 0.0
        self.in_sink = False  # inside a hash or sink call (read by stop(), without a lock)
        self.thread = threading.Thread(target=self._run, name="nrtrewrite-sink", daemon=True)
        threads.start(self.thread)  # (never waits forever: nrtrewrite.threads)

    def put(self, batch: list[tuple[str, np.ndarray]]) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(batch)

    def _run(self) -> None:
        while (batch := self.queue.get()) is not None:
            for name, arr in _coalesced(batch):
                self.in_sink = True  # before the error is looked at: stop() relies on it
                if self.error is not None:
                    self.in_sink = False
                    break
                try:
                    self.hash_s += _timed_update(self.hashes[name], arr)
                    if self.sink is not None:
                        self.sink(name, arr)
                except BaseException as err:  # re-raised in the lowering thread
                    self.error = err
                finally:
                    self.in_sink = False

    def stop(self, timeout: float = 30.0) -> None:
        """Make the thread skip what is queued and wait (at most ``timeout`` seconds) until
        it is out of its current hash or sink call, so that no file is written once this
        returns; no lock is waited for (a signal's exception may have left the queue's held):
        the thread is then ended through :func:`end_queue`."""
        self.error = self.error or RuntimeError("stopped")
        deadline = time.monotonic() + timeout
        while self.in_sink and self.thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        end_queue(self.queue)
        self.thread.join(max(0.0, deadline - time.monotonic()))  # ends at once: None next

    def close(self, batch: list[tuple[str, np.ndarray]]) -> None:
        """Hand over the last ``batch``, wait for the thread to finish, re-raise its error."""
        if batch:
            self.queue.put(batch)
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


class RankBuilder:
    """Accumulates every artifact of one rank as lists of numpy arrays, or streams them.

    Without a ``sink`` the record arrays are kept (:meth:`finish` returns them); with one,
    each array goes to ``sink(file name, array)`` as soon as it is appended and only the
    counts and the running SHA-256 of each file are kept, so memory holds one entry's
    records at a time (the FIFO files, channel-major, are kept until :meth:`finish`).
    Hashing and the sink run on a background thread (both release the GIL), overlapping
    the lowering of the next entry, from the first big array on; :meth:`close` waits for
    them.  ``hash_s``: the seconds spent in the files' SHA-256 updates, on the thread or
    inline (complete after :meth:`close`)."""

    #: The writer thread starts with the first array of this size (until then, and for a
    #: rank of small entries, hashing and the sink run inline).
    THREAD_BYTES = 256 << 10

    def __init__(self, rank: int, sink: Callable[[str, np.ndarray], None] | None = None):
        self.rank = rank
        self.sink = sink
        self.parts: dict[str, list[np.ndarray]] = {name: [] for name in F.ARTIFACTS}
        self.counts: dict[str, int] = {name: 0 for name in F.ARTIFACTS}
        self.hashes = {name: hashlib.sha256() for name in F.ARTIFACTS}
        self.channels: dict[int, ChannelState] = {}
        self.tpinc_by_entry: dict[tuple[int, int], np.ndarray] = {}
        self._consumer: _Consumer | None = None
        self._batch: list[tuple[str, np.ndarray]] = []
        self._batch_bytes = 0
        self.hash_s = 0.0

    def state(self, channel: int) -> ChannelState:
        st = self.channels.get(channel)
        if st is None:
            st = self.channels[channel] = ChannelState()
        return st

    def append(self, name: str, arr: np.ndarray) -> int:
        """Add records to file ``name`` (never modified afterwards); their first index."""
        first = self.counts[name]
        if arr.size:
            arr = np.ascontiguousarray(arr)
            if self._consumer is None and arr.nbytes < self.THREAD_BYTES:
                # small ranks never start the thread
                self.hash_s += _timed_update(self.hashes[name], arr)
                if self.sink is not None:
                    self.sink(name, arr)
            else:  # to the thread, in batches of about THREAD_BYTES (fewer queue hand-offs)
                if self._consumer is None:
                    self._consumer = _Consumer(self.hashes, self.sink)
                self._batch.append((name, arr))
                self._batch_bytes += arr.nbytes
                if self._batch_bytes >= self.THREAD_BYTES:
                    self.flush()
            if self.sink is None:
                self.parts[name].append(arr)
            self.counts[name] += arr.size
        return first

    def flush(self) -> None:
        """Hand what is batched to the writer thread now, if it runs (the emitter calls this
        after each block of descriptors, so the thread never waits for a batch to fill)."""
        if self._consumer is not None and self._batch:
            self._consumer.put(self._batch)
            self._batch, self._batch_bytes = [], 0

    def abort(self) -> None:
        """Stop the writer thread without a lock (a failed lowering's cleanup: a signal's
        exception may have left the queue's lock held): it skips what is queued; once this
        returns, it writes nothing more (:meth:`_Consumer.stop`)."""
        consumer, self._consumer = self._consumer, None
        self._batch, self._batch_bytes = [], 0
        if consumer is not None:
            consumer.stop()
            self.hash_s += consumer.hash_s

    def close(self) -> None:
        """Wait until every appended array is hashed and in the sink (re-raises its error)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            batch, self._batch, self._batch_bytes = self._batch, [], 0
            try:
                consumer.close(batch)
            finally:
                self.hash_s += consumer.hash_s

    def summary(self, name: str) -> dict:
        """records, bytes and sha256 of everything appended to file ``name`` (after
        :meth:`close`)."""
        return {"records": self.counts[name],
                "bytes": self.counts[name] * F.ARTIFACTS[name][0].itemsize,
                "sha256": self.hashes[name].hexdigest()}

    def finish(self) -> dict[str, list[np.ndarray]]:
        """Append the FIFO files (channel-major); every artifact file as its list of record
        arrays, in file order (empty lists with a sink).

        The parts are written one after the other (never concatenated: no extra copy)."""
        for ch in sorted(self.channels):
            st = self.channels[ch]
            for name, recs in (("net_ops.bin", st.ops), ("net_src.bin", st.fifo("src")),
                               ("net_dest.bin", st.fifo("dest"))):
                for arr in recs:
                    self.append(name, arr)
        return {name: list(self.parts[name]) for name in F.ARTIFACTS}

    def fifo_index(self) -> list[dict]:
        """Per-channel (first, count) slices of the FIFO files, in file order."""
        index = []
        first = {"ops": 0, "src": 0, "dest": 0}
        for ch in sorted(self.channels):
            st = self.channels[ch]
            n = {"ops": sum(a.size for a in st.ops),
                 "src": st.fifo_count("src"), "dest": st.fifo_count("dest")}
            if not any(n.values()):
                continue
            index.append({"channel": ch, **{k: [first[k], n[k]] for k in n}})
            for k in n:
                first[k] += n[k]
        return index


def _mark_end_row() -> np.ndarray:
    row = IR.empty(1)
    row["leaf"] = int(Leaf.mark_end)
    return row


#: The IR row of a channel's closing mark_end leg (the emitter adds one per channel).
_MARK_END = _mark_end_row()


def _cells(rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    """Flat indices of cells ``(rows, cols)`` of a C-contiguous ``(n, width)`` array, for
    ``np.take``: gathering by one flat index is 3 - 6 times faster than ``a[rows, cols]``,
    which the emitter's (leg, slot) tables are read with several times per record."""
    return rows * width + cols


def _any_cols(x: np.ndarray) -> np.ndarray:
    """``x.any(axis=1)`` of a 2-D bool array of a few columns, as an OR of its columns: numpy
    reduces a short last axis at some 10 ns a row, ten times the cost of the ORs."""
    out = np.zeros(x.shape[0], bool) if x.shape[1] == 0 else x[:, 0].copy()
    for k in range(1, x.shape[1]):
        out |= x[:, k]
    return out


def core_base(peer: Peer) -> int:
    return MemoryMap.core_base(peer.logical_core)


def route_bits(device: int, self_device: int) -> int:
    """Routing bits of a target on ``device`` seen from ``self_device`` (0 when local)."""
    return route(0, device, self_device)


#: Semaphores of the 32 ring channels: 16..143 (docs/FORMATS.md §7); above, the event window.
SEM_CHANNEL_END = SEM_CHANNEL_BASE + 32 * SEMS_PER_CHANNEL


def sem_role(sem: np.ndarray) -> np.ndarray:
    """sem.bin role byte: the channel semaphore role, or ROLE_OTHER (TOP_SP ids, event window)."""
    sem = np.asarray(sem, np.int64)
    return np.where((sem >= SEM_CHANNEL_BASE) & (sem < SEM_CHANNEL_END),
                    (sem - SEM_CHANNEL_BASE) % SEMS_PER_CHANNEL, ROLE_OTHER)


#: :func:`sem_role` of every semaphore id of a core (0..255), for a gather instead of the
#: comparisons and the integer modulo per semaphore BD.
_SEM_ROLE = sem_role(np.arange(256))


@dataclass(frozen=True)
class _Batch:
    """The entries of one :func:`emit_entries` call, their tables joined: an IR row names
    views and peers of its own entry; ``voff`` / ``poff`` shift them into ``views`` and
    ``pt`` (every entry's, one after the other)."""

    ctxs: list[EntryContext]
    views: ViewList  # every entry's, one after the other
    pt: PeerTables
    voff: np.ndarray  # per entry: its first view in ``views``
    poff: np.ndarray  # per entry: its first peer in ``pt``
    nv: np.ndarray  # per entry: its number of views
    npeer: np.ndarray  # per entry: its number of peers

    @classmethod
    def of(cls, ctxs: list[EntryContext]) -> _Batch:
        views, counts = ViewList.join([c.views for c in ctxs])
        nv = np.array(counts, np.int64)
        npeer = np.array([len(c.peers) for c in ctxs], np.int64)
        tabs = [c.tables() for c in ctxs]
        if len(ctxs) == 1:
            pt = tabs[0]
        else:
            pt = PeerTables(*(np.concatenate([getattr(t, f) for t in tabs])
                              for f in ("net", "core", "bits", "logical_core", "rank")))
        return cls(ctxs, views, pt, np.cumsum(nv) - nv, np.cumsum(npeer) - npeer, nv, npeer)


def _ints(values: list[int]) -> np.ndarray:
    return np.array(values, np.int64)


def _uniform(values: np.ndarray):
    """The one value of ``values`` if they are all equal (a Python int), else None."""
    return int(values[0]) if values.size and values.min() == values.max() else None


def emit_entries(b: RankBuilder, items: list[tuple[EntryContext, np.ndarray]]) -> list[dict]:
    """Emit consecutive SPAD entries of one rank, each from its leg IR (rows grouped by
    channel, in program order), in one pass: the same records, in the same order, as one
    call per entry in turn (one pass over every leg of the batch amortises the fixed cost
    of its numpy calls; docs/PERFORMANCE.md).

    Returns a summary per entry, ``{"legs": n, "bds": n, "channels": [...], "tx": {channel:
    entries}, "rx": {...}}``, the same as one call per entry gives.  When this raises, part
    of the batch may have been appended (the lowering has failed).  Every check depends only
    on an entry's own IR and context, never on the builder's state, so emitting the entries
    one by one then raises the same error at the entry that has it
    (:func:`nrtrewrite.lower._emit_batch` does, to name its trigger).

    The stages, each over every leg of the batch at once: the legs as columns
    (:func:`_legs_of`, every check of the IR's references), the data BDs and CCE
    descriptors (:func:`_data_records`), the semaphore BDs (:func:`_sem_records`), the 0xBF
    words (:func:`_sb2sb_records`), the leg records (:func:`_leg_records`), the
    tp_inc_steps runs (:func:`_tpinc_steps`) and the net-proxy FIFOs
    (:func:`_fifo_records`)."""
    ctxs = [ctx for ctx, _ir in items]
    if len({c.hw_generation for c in ctxs}) > 1:  # never from one lowering (one platform)
        return [s for item in items for s in emit_entries(b, [item])]
    summaries = [{"legs": 0, "bds": 0, "channels": [], "tx": {}, "rx": {}} for _ in items]
    bt = _Batch.of(ctxs)
    lg = _legs_of(items, bt, summaries)
    if lg is None:  # entries without legs (nothing to move): SPAD entries with no channel
        return summaries
    data = _data_records(b, bt, lg)
    if data is None:  # SBUF access patterns: one entry at a time
        return [s for item in items for s in emit_entries(b, [item])]
    sems = _sem_records(b, bt, lg)
    words = _sb2sb_records(b, bt, lg)
    _leg_records(b, lg, data, sems, words)
    tpinc = _tpinc_steps(lg, data)
    fifo = _fifo_records(b, bt, lg)
    b.tpinc_by_entry.update(tpinc)
    for e, c, info, src, dest, idx in fifo:
        st = b.state(c)
        st.ops.append(info)
        st.entry.append(ctxs[e].spad_index)
        st.block.append(ctxs[e].subgraph_index)
        st.idx.append(idx)
        st.src.append(src)
        st.dest.append(dest)
        if src is not None:
            summaries[e]["tx"][c] = summaries[e]["tx"].get(c, 0) + src.size
        if dest is not None:
            summaries[e]["rx"][c] = summaries[e]["rx"].get(c, 0) + dest.size
    legs_e = np.bincount(lg.leg_e, minlength=len(items)).tolist()
    bds_e = np.bincount(lg.leg_e, weights=data.leg_bd_count, minlength=len(items)).astype(np.int64)
    for s, nl, nb in zip(summaries, legs_e, bds_e.tolist()):
        s["legs"], s["bds"] = nl, nb
    return summaries


@dataclass(frozen=True)
class _Legs:
    """Every leg of an :func:`emit_entries` batch as columns (one row per leg: per
    *segment*, that is one channel of one entry, its handshake rows, its IR rows and its
    ``mark_end``), the IR's references already checked (:func:`_legs_of`).  Views and peers
    without ``_g`` are the entry's own (peer 0: the rank itself), with ``_g`` the batch's."""

    ctxs: list[EntryContext]  # the batch's, one per entry
    vt: tuple  # the batch's views' :meth:`ViewList.tables`: (linear?, base, dsize) per view
    n: int  # legs
    # per segment
    seg_ch: np.ndarray  # channel
    seg_e: np.ndarray  # entry
    n_c: np.ndarray  # legs, mark_end excluded
    compl_sem_c: np.ndarray  # the channel's dma_compl_sema, send_sema and recv_sema
    send_sem_c: np.ndarray
    recv_sem_c: np.ndarray
    # per leg: where it is
    leg_first_c: np.ndarray  # per segment: its first leg
    leg_ci: np.ndarray  # segment
    leg_e: np.ndarray  # entry
    is_end: np.ndarray  # the segment's mark_end
    # per leg: the IR's columns (the slot arrays cut to the batch's widest leg: ws, wd, wi)
    leaf: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    length: np.ndarray
    half: np.ndarray
    tstep: np.ndarray
    tgroup: np.ndarray
    s_n: np.ndarray
    d_n: np.ndarray
    i_n: np.ndarray
    ws: int
    wd: int
    wi: int
    dst_peer: np.ndarray
    reduce: np.ndarray
    rtype: np.ndarray
    w_n: np.ndarray
    w_sem: np.ndarray
    w_val: np.ndarray
    i_peer: np.ndarray
    i_sem: np.ndarray
    i_val: np.ndarray
    net_src: np.ndarray
    net_view: np.ndarray
    net_sem: np.ndarray
    # per leg: shifted into the batch's tables
    voff: np.ndarray
    poff: np.ndarray
    src_view_g: np.ndarray
    dst_view_g: np.ndarray
    gw_g: np.ndarray
    src_peer_g: np.ndarray
    dst_peer_g: np.ndarray
    i_peer_g: np.ndarray
    # per leg: element size (dsize_one: the batch's one size, or None)
    dsize: np.ndarray
    dsize_one: int | None
    # per leg and destination slot: across the network (then to the gateway view, from us)
    dst_net: np.ndarray
    sends_net: np.ndarray  # per leg
    eff_dst_view: np.ndarray
    eff_dst_peer: np.ndarray


def _legs_of(items: list[tuple[EntryContext, np.ndarray]], bt: _Batch,
             summaries: list[dict]) -> _Legs | None:
    """The batch's legs (:class:`_Legs`), each entry's channels added to its summary; None
    when no entry has a leg.  Every reference a leg makes is checked against its own entry's
    tables here, before anything is built."""
    ctxs = bt.ctxs
    pt = bt.pt
    # a *segment* is one channel of one entry: its handshake rows, its IR rows, its mark_end
    parts, seg_ch, seg_e, seg_n = [], [], [], []
    for e, (ctx, ir) in enumerate(items):
        if pt.net[bt.poff[e]]:
            raise LoweringError("peer 0 must be the rank itself")
        ir = IR.emitted(ir)  # rows with an empty element range emit no leg, unless kept
        # per channel, in program order: the entry handshake's rows, the IR's rows, mark_end
        for c, hs, rows in entry_handshake(ir, ctx, ctx.tables().net):
            parts += (hs, rows, _MARK_END)
            seg_ch.append(c)
            seg_e.append(e)
            seg_n.append(hs.size + rows.size)
            summaries[e]["channels"].append(int(c))
    if not parts:
        return None
    seg_ch, seg_e, n_c = (np.array(v, np.int64) for v in (seg_ch, seg_e, seg_n))
    nseg = seg_ch.size
    total_c = n_c + 1
    leg_first_c = np.cumsum(total_c) - total_c
    n = int(total_c.sum())
    end_pos = leg_first_c + n_c
    leg_ci = np.repeat(np.arange(nseg, dtype=np.int64), total_c)  # the leg's segment
    leg_e = seg_e[leg_ci]  # the leg's entry
    is_end = np.zeros(n, bool)
    is_end[end_pos] = True
    # every leg as an IR row: per segment its handshake rows, its IR rows, mark_end
    table = IR.concat(parts)
    _check_counts(table)  # the IR's rows (the handshake and mark_end rows always fit)

    def col(field: str) -> np.ndarray:
        return table[field].astype(np.int64)

    leaf = col("leaf")
    start, stop, half = col("start"), col("stop"), col("half")
    tstep, tgroup = col("step"), col("group")
    s_n, d_n, i_n = col("n_src"), col("n_dst"), col("n_inc")
    # the slot arrays cut to the batch's widest leg: most legs use 1 - 3 of the 8 slots, and
    # every slot read below is one a leg uses
    ws, wd, wi = (max(1, int(c.max())) for c in (s_n, d_n, i_n))

    def slot_col(field: str, width: int) -> np.ndarray:
        return table[field][:, :width].astype(np.int64)

    src_view, src_peer = slot_col("src_view", ws), slot_col("src_peer", ws)
    dst_view, dst_peer = slot_col("dst_view", wd), slot_col("dst_peer", wd)
    reduce = table["reduce"] != 0
    rtype = col("reduction_type")
    w_n, w_sem, w_val = col("n_wait"), col("wait_sem"), col("wait_val")
    i_peer, i_sem, i_val = (slot_col(f, wi) for f in ("inc_peer", "inc_sem", "inc_val"))
    net_src = col("net_src_peer")
    net_view = col("net_view")
    net_sem = col("net_sem")
    gw_leg = col("gw_view")
    gw_leg = np.where(gw_leg == NO_VIEW, _ints([c.gw_view for c in ctxs])[leg_e], gw_leg)
    _check_legs(bt.nv[leg_e], bt.npeer[leg_e], s_n, d_n, src_view, src_peer, dst_view,
                dst_peer, reduce, i_n, i_peer, net_src, net_view)
    # from here on views and peers are indices into the batch's tables (``_g``: shifted);
    # a peer's entry-local number 0 is still the rank itself
    voff, poff = bt.voff[leg_e], bt.poff[leg_e]
    src_view_g, dst_view_g, gw_g = src_view + voff[:, None], dst_view + voff[:, None], gw_leg + voff
    src_peer_g, dst_peer_g, i_peer_g = (src_peer + poff[:, None], dst_peer + poff[:, None],
                                        i_peer + poff[:, None])
    length = stop - start
    if np.any((length == 0) & ((d_n > 0) | (net_src >= 0))):  # a kept leg (``keep``)
        raise LoweringError("a leg without elements must not move data: it has destinations "
                            "or a network receive (a 0-byte transfer or FIFO entry)")
    sems_of = {c: tuple(channel_sem(c, role) for role in (SEM_COMPL, SEM_SEND, SEM_RECV))
               for c in set(seg_ch.tolist())}
    compl_sem_c, send_sem_c, recv_sem_c = (np.array([sems_of[c][i] for c in seg_ch.tolist()],
                                                    np.int64) for i in range(3))
    dsize_e = bt.views.dsize[bt.voff]
    dsize_one = _uniform(dsize_e)
    dsize = dsize_e[leg_e]

    # destinations on a peer across the network go to our gateway (and a transmit FIFO entry):
    # the ring leaves' ``use_gateway`` (encd_hybrid_ring_is_next_neigh_use_gateway, seed 001)
    dst_net = (_SLOT_INDEX[:wd] < d_n[:, None]) & pt.net[dst_peer_g]
    sends_net = _any_cols(dst_net)
    if sends_net.any() and (gw_leg[sends_net] >= bt.nv[leg_e[sends_net]]).any():
        raise LoweringError("a leg stages a network send in a gateway view that the entry lacks")
    eff_dst_view = np.where(dst_net, gw_g[:, None], dst_view_g)
    eff_dst_peer = np.where(dst_net, poff[:, None], dst_peer_g)
    return _Legs(
        ctxs=ctxs, vt=bt.views.tables(), n=n, seg_ch=seg_ch, seg_e=seg_e, n_c=n_c,
        compl_sem_c=compl_sem_c, send_sem_c=send_sem_c, recv_sem_c=recv_sem_c,
        leg_first_c=leg_first_c, leg_ci=leg_ci, leg_e=leg_e, is_end=is_end, leaf=leaf,
        start=start, stop=stop, length=length, half=half, tstep=tstep, tgroup=tgroup,
        s_n=s_n, d_n=d_n, i_n=i_n, ws=ws, wd=wd, wi=wi, dst_peer=dst_peer, reduce=reduce,
        rtype=rtype, w_n=w_n, w_sem=w_sem, w_val=w_val, i_peer=i_peer, i_sem=i_sem, i_val=i_val,
        net_src=net_src, net_view=net_view, net_sem=net_sem, voff=voff, poff=poff,
        src_view_g=src_view_g, dst_view_g=dst_view_g, gw_g=gw_g, src_peer_g=src_peer_g,
        dst_peer_g=dst_peer_g, i_peer_g=i_peer_g, dsize=dsize, dsize_one=dsize_one,
        dst_net=dst_net, sends_net=sends_net, eff_dst_view=eff_dst_view, eff_dst_peer=eff_dst_peer)


@dataclass(frozen=True)
class _Data:
    """What :func:`_data_records` built, per leg: its ``sdma_op``, its tiles, its data BDs (of
    them M2S: source streams) and CCE descriptors, and the rank's dma.bin / cce.bin record
    counts before the batch."""

    sdma_op: np.ndarray  # CCE when the leg reduces, CME when it has destinations, else 0
    n_tiles: np.ndarray
    leg_bd_count: np.ndarray
    m2s: np.ndarray
    leg_cce: np.ndarray
    dma_first_all: int
    cce_first_all: int


def _data_records(b: RankBuilder, bt: _Batch, lg: _Legs) -> _Data | None:
    """The batch's data BDs (dma.bin) and CCE descriptors (cce.bin), leg by leg, tile by tile;
    None, with nothing appended, when a leg of a batch of several entries follows an SBUF
    access pattern (the caller emits those entries one at a time)."""
    n, s_n, d_n, reduce, rtype = lg.n, lg.s_n, lg.d_n, lg.reduce, lg.rtype
    start, stop, length, dsize, dsize_one = lg.start, lg.stop, lg.length, lg.dsize, lg.dsize_one
    ws, wd = lg.ws, lg.wd
    # ---- tiles -------------------------------------------------------------------------------
    per_tile = tile_elements(dsize, np.maximum(length, 1), reduce,
                             hw_generation=lg.ctxs[0].hw_generation)
    n_tiles = np.where(d_n > 0, -(-length // per_tile), 0)

    # ---- the leg-slot table: (view, peer) of every source and destination of every leg ---------
    slots = s_n + d_n
    lt_leg, lt_slot, lt_first = _expand(slots)
    lt_is_src = lt_slot < s_n[lt_leg]
    lt_j = np.minimum(np.maximum(lt_slot - s_n[lt_leg], 0), wd - 1)
    lt_i = np.minimum(lt_slot, ws - 1)
    # (leg, slot) cells gathered by flat index (:func:`_cells`)
    lt_src, lt_dst = _cells(lt_leg, lt_i, ws), _cells(lt_leg, lt_j, wd)
    lt_view = np.where(lt_is_src, np.take(lg.src_view_g, lt_src),
                       np.take(lg.eff_dst_view, lt_dst))
    lt_peer = np.where(lt_is_src, np.take(lg.src_peer_g, lt_src),
                       np.take(lg.eff_dst_peer, lt_dst))
    sdma_op = np.where(reduce, int(SdmaOp.CCE), np.where(d_n > 0, int(SdmaOp.CME), 0))
    lt_meta = (sdma_op[lt_leg] | np.where(lt_is_src, 0, F.META_DIR_S2M)
               | (np.where(lt_is_src, lt_slot, lt_slot - s_n[lt_leg]) << F.META_STREAM_SHIFT))
    # SoC offset of each peer's window: core base plus routing bits (disjoint bit ranges)
    peer_off = bt.pt.offset
    view_linear, vbase, _vdsize = lg.vt
    linear = bool(view_linear[lt_view].all())
    if not linear and len(lg.ctxs) > 1:  # SBUF access patterns: one entry at a time
        return None

    # ---- data BDs and CCE descriptors, in blocks of legs -------------------------------------
    leg_ns = np.where(reduce, s_n, 0)  # CCE descriptors per tile
    leg_w3 = s_n | (rtype << 8)
    leg_cce = n_tiles * leg_ns
    if linear:
        leg_bd_count, m2s = n_tiles * slots, n_tiles * s_n
        max_tile = np.where(n_tiles > 0, np.minimum(per_tile, length), 0) * dsize
        if max_tile.size and max_tile.max() > F.BD_MAX_BYTES:
            raise LimitError(f"a BD of {int(max_tile.max())} bytes exceeds {F.BD_MAX_BYTES}")
    else:
        tile_leg, ta, tb = _tiles(0, n, n_tiles, per_tile, start, stop)
        bds, leg_bd_count, m2s = _bds_runs(
            bt.views, n, tile_leg, ta, tb, lt_first, slots, lt_view, lt_peer, lt_meta, s_n,
            peer_off)
    dma_first_all, cce_first_all = b.counts["dma.bin"], b.counts["cce.bin"]
    cce_tab = _cce_tables(lg.ctxs, lg.leg_e, leg_cce) if leg_cce.any() else None
    # generation tag: position of the BD among this rank's data BDs of its channel
    seg_bd_count = np.bincount(lg.leg_ci, weights=leg_bd_count,
                               minlength=lg.seg_ch.size).astype(np.int64)
    gen = _GenTags(b, lg.seg_ch, seg_bd_count)
    if linear:
        # per leg slot: the constant part of the BD words (flags | meta << 32, address)
        lt_flags = np.zeros(lt_view.size, np.int64)  # FIRST on slot 0, LAST on the last slot
        has = slots > 0
        lt_flags[lt_first[has]] |= F.LEN_FIRST
        lt_flags[(lt_first + slots - 1)[has]] |= F.LEN_LAST
        lt_word0 = lt_flags | (lt_meta << 32)
        lt_addr = vbase[lt_view] + peer_off[lt_peer]
        # built for a block of consecutive legs at a time, so every temporary of a block
        # stays in the CPU cache; each block is appended (streamed to its file when the
        # builder has a sink) before the next one is built
        for l0, l1 in _blocks(leg_bd_count + leg_cce, EMIT_BLOCK, EMIT_FIRST_BLOCK):
            tl, ta, tb = _tiles(l0, l1, n_tiles, per_tile, start, stop)
            tsize = dsize_one if dsize_one is not None else dsize[l0:l1][tl]
            words_bd = _bds_linear(tl + l0, ta, tb, tsize, slots, lt_first, lt_word0, lt_addr)
            gen.apply(words_bd[:, 0])
            b.append("dma.bin", words_bd.view(F.BD_DTYPE).reshape(-1))
            if cce_tab is not None:
                b.append("cce.bin", _cce_block(tl + l0, ta, tb, tsize, leg_ns, leg_w3, cce_tab))
            b.flush()
    else:
        gen.apply(bds["len_ctrl"])
        b.append("dma.bin", bds)
        if cce_tab is not None:
            b.append("cce.bin", _cce_block(tile_leg, ta, tb, dsize[tile_leg], leg_ns, leg_w3,
                                           cce_tab))
    return _Data(sdma_op, n_tiles, leg_bd_count, m2s, leg_cce, dma_first_all, cce_first_all)


def _sem_records(b: RankBuilder, bt: _Batch, lg: _Legs) -> tuple[int, np.ndarray, np.ndarray]:
    """The batch's semaphore BDs (sem.bin): per leg its waits, the dma_compl inc and the IR's
    incs; a mark_end leg has the completion wait alone.  ``(the rank's sem.bin records
    before the batch, semaphore BDs per leg, each leg's first among the batch's)``."""
    pt, n, is_end, leg_ci, poff = bt.pt, lg.n, lg.is_end, lg.leg_ci, lg.poff
    w_n, w_sem, w_val, i_n, wi = lg.w_n, lg.w_sem, lg.w_val, lg.i_n, lg.wi
    i_peer, i_sem, i_val = lg.i_peer, lg.i_sem, lg.i_val
    n_sem = np.where(is_end, 1, w_n + 1 + i_n)
    s_leg, s_k, s_first = _expand(n_sem)
    s_ci = leg_ci[s_leg]
    s_end = is_end[s_leg]
    s_wait = ~s_end & (s_k < w_n[s_leg])
    s_compl = ~s_end & (s_k == w_n[s_leg])
    s_inc = ~s_end & ~s_wait & ~s_compl
    wk = np.minimum(s_k, MAX_WAIT - 1)
    ik = np.minimum(np.maximum(s_k - w_n[s_leg] - 1, 0), wi - 1)
    s_inc_cell, s_wait_cell = _cells(s_leg, ik, wi), _cells(s_leg, wk, w_sem.shape[1])
    inc_peer = np.take(i_peer, s_inc_cell)
    inc_sem = np.take(i_sem, s_inc_cell)
    inc_val = np.take(i_val, s_inc_cell)
    inc_net = s_inc & pt.net[np.take(lg.i_peer_g, s_inc_cell)]
    if np.any(inc_net & (inc_val != 1)):
        raise LoweringError("an increment across the network must have value 1 (the net proxy "
                            "increments the receiver once per transfer)")
    if inc_net.any():
        net_incs = np.bincount(s_leg[inc_net], minlength=n)
        if np.any(net_incs != lg.dst_net.sum(axis=1)):
            raise LoweringError("a leg must increment each network destination exactly once "
                                "(one send_sema count per transfer the proxy makes)")
    # the roles are exclusive: mark_end / completion, wait, increment (network: send_sema)
    sem_id = np.where(s_end | s_compl, lg.compl_sem_c[s_ci],
                      np.where(s_wait, np.take(w_sem, s_wait_cell),
                               np.where(inc_net, lg.send_sem_c[s_ci], inc_sem)))
    sem_peer = np.where(s_inc & ~inc_net, inc_peer, 0)  # entry-local: 0 = the rank itself
    sem_peer_g = sem_peer + poff[s_leg]
    window = np.where(s_end | s_wait, EVT_SEM_DEC, EVT_SEM_INC)
    sps = pt.logical_core[sem_peer_g]
    local_addr = (EVT_SEM_BASE + ((sps & 7) << 30) + ((sps > 7) << 47) + window + 4 * sem_id)
    if np.any(sem_id > 255):
        raise LimitError("a semaphore id exceeds the 256 semaphores of a core")
    seg_sem_count = np.bincount(s_ci, minlength=lg.seg_ch.size)
    seg_sem_first = np.cumsum(seg_sem_count) - seg_sem_count
    sem_base = _advance_counters(b, lg.seg_ch, seg_sem_count, "sem_count")
    sgen = ((sem_base[s_ci] + np.arange(s_leg.size, dtype=np.int64) - seg_sem_first[s_ci])
            // F.BD_RING_ENTRIES) & F.GEN_MASK
    sems = np.empty(s_leg.size, F.SEM_DTYPE)
    sems["ctrl"] = (np.where(s_end | s_wait, int(EvtSemSubop.WAIT_GE_AND_DEC), int(EvtSemSubop.INC))
                    | (_SEM_ROLE[sem_id] << F.SEM_ROLE_SHIFT)  # sem_id < 256: checked above
                    | np.where(sem_peer != 0, F.SEM_REMOTE, 0) | (sgen << F.GEN_SHIFT))
    sems["value"] = np.where(s_end, lg.n_c[s_ci], np.where(
        s_wait, np.take(w_val, s_wait_cell), np.where(s_compl, 1, inc_val)))
    sems["addr"] = local_addr | pt.bits[sem_peer_g]
    return b.append("sem.bin", sems), n_sem, s_first


def _sb2sb_records(b: RankBuilder, bt: _Batch, lg: _Legs) -> tuple[int, np.ndarray, np.ndarray]:
    """The batch's 0xBF words (sb2sb.bin): per data leg, pieces of <= 256 elements per
    dimension.  ``(the rank's sb2sb.bin records before the batch, pieces per leg, each leg's
    first among the batch's)``."""
    length, d_n, w_n = lg.length, lg.d_n, lg.w_n
    cap2 = F.T3D_DIM_CAP * F.T3D_DIM_CAP
    full, q, r = length // cap2, (length // F.T3D_DIM_CAP) % F.T3D_DIM_CAP, length % F.T3D_DIM_CAP
    pieces = np.where(d_n > 0, full + (q > 0) + (r > 0), 0)
    p_leg, p_k, p_first = _expand(pieces)
    kind = np.where(p_k < full[p_leg], 0, np.where((p_k == full[p_leg]) & (q[p_leg] > 0), 1, 2))
    n0 = np.where(kind == 2, r[p_leg], F.T3D_DIM_CAP)
    n1 = np.where(kind == 0, F.T3D_DIM_CAP, np.where(kind == 1, q[p_leg], 1))
    piece_off = np.where(kind == 2, length[p_leg] - r[p_leg], p_k * cap2)
    p_ci = lg.leg_ci[p_leg]
    last_piece = p_k == pieces[p_leg] - 1
    pw = (p_k == 0) & (w_n[p_leg] > 0)
    words = _sb2sb_words(lg.ctxs, lg.leg_e[p_leg])
    words["wait_mode"] = np.where(pw, int(EvtSemSubop.WAIT_GE_AND_DEC), 0)
    words["wait_idx"] = np.where(pw, np.take(lg.w_sem[:, 0], p_leg), 0)
    words["semaphore_value"] = np.where(pw, np.take(lg.w_val[:, 0], p_leg), 0)
    words["update_mode"] = np.where(last_piece, int(EvtSemSubop.INC), 0)
    words["update_idx"] = np.where(last_piece, lg.compl_sem_c[p_ci], 0)
    elem0 = lg.start[p_leg] + piece_off
    view_linear, vbase, vdsize = lg.vt
    anchor = bt.views.anchor
    for part, vcol in (("src", np.take(lg.src_view_g[:, 0], p_leg)),
                       ("dst", np.take(lg.eff_dst_view[:, 0], p_leg))):
        if view_linear[vcol].all():
            start_addr = vbase[vcol] + elem0 * vdsize[vcol] - anchor[vcol]
        else:
            start_addr = np.zeros(p_leg.size, np.int64)
            for v in np.unique(vcol):
                sel = vcol == v
                start_addr[sel] = bt.views[int(v)].address(elem0[sel]) - anchor[v]
        if p_leg.size and ((start_addr < 0).any() or (start_addr > 0xFFFFFFFF).any()):
            raise LimitError("a leg's start offset does not fit the 32-bit TENSOR3D start_addr")
        words[part]["start_addr"] = start_addr
        words[part]["num_elem"][:, 0] = n0
        words[part]["num_elem"][:, 1] = n1
    return b.append("sb2sb.bin", words), pieces, p_first


def _leg_records(b: RankBuilder, lg: _Legs, data: _Data, sems: tuple, words: tuple) -> None:
    """The batch's leg records (legs.bin): each leg's place in the other files and its ring
    step (``sems``, ``words``: what :func:`_sem_records` and :func:`_sb2sb_records` return)."""
    n, is_end, leg_ci, d_n, w_n = lg.n, lg.is_end, lg.leg_ci, lg.d_n, lg.w_n
    sem_first_all, n_sem, s_first = sems
    sb_first_all, pieces, p_first = words
    # a leg sends if a used increment or destination slot names a peer
    sends = (_any_cols((_SLOT_INDEX[:lg.wi] < lg.i_n[:, None]) & (lg.i_peer != 0))
             | _any_cols((_SLOT_INDEX[:lg.wd] < d_n[:, None]) & (lg.dst_peer != 0)))
    legs = np.zeros(n, F.LEG_DTYPE)
    legs["trigger"] = _ints([c.trigger for c in lg.ctxs])[lg.leg_e]
    legs["spad_index"] = _ints([c.spad_index for c in lg.ctxs])[lg.leg_e]
    legs["channel"] = lg.seg_ch[leg_ci]
    legs["sdma_op"] = data.sdma_op
    legs["step"] = np.arange(n, dtype=np.int64) - lg.leg_first_c[leg_ci]
    legs["leaf"] = lg.leaf
    legs["half"] = lg.half
    legs["reduction_type"] = np.where(lg.reduce, lg.rtype, F.NO_REDUCTION_TYPE)
    legs["neigh"] = np.where(sends & ~is_end, int(EncdNeigh.ENCD_NEIGH_NEXT),
                             np.where((w_n > 0) & (d_n == 0) & ~is_end,
                                      int(EncdNeigh.ENCD_NEIGH_PREV),
                                      int(EncdNeigh.ENCD_NEIGH_LOCAL)))
    legs["sb2sb_first"] = sb_first_all + p_first
    legs["sb2sb_count"] = pieces
    legs["n_tiles"] = data.n_tiles
    legs["dma_first"] = data.dma_first_all + np.cumsum(data.leg_bd_count) - data.leg_bd_count
    legs["dma_count"] = data.leg_bd_count
    legs["cce_first"] = data.cce_first_all + np.cumsum(data.leg_cce) - data.leg_cce
    legs["cce_count"] = data.leg_cce
    legs["sem_first"] = sem_first_all + s_first
    legs["sem_count"] = n_sem
    legs["elem_start"] = lg.start
    legs["num_elements"] = lg.length
    # steps per chunk group of each channel: 1 + its largest step (mark_end excluded)
    spg = np.maximum.reduceat(np.where(is_end, 0, lg.tstep + 1), lg.leg_first_c)
    legs["ring_step"] = np.where(is_end, 0, lg.tstep + lg.tgroup * spg[leg_ci])
    b.append("legs.bin", legs)


def tpinc_over_text(leaf: int, channel: int, m2s: int, s2m: int, elements: int, tiles: int,
                    s_n: int, d_n: int) -> str:
    """Why ``lower`` refuses a leg of more than ``TPINC_MAX_BDS`` M2S or S2M BDs: the leg
    (its leaf code, channel, BD counts; its elements in ``tiles`` tiles of ``s_n`` source
    and ``d_n`` destination streams) and why it has so many (the words :func:`_tpinc_steps`
    refuses it with, and ``explain`` shows for it: nrtrewrite.bdgate.first_over)."""
    if m2s == tiles * s_n and s2m == tiles * d_n:
        # one BD a tile and stream: the leg is too long, not its memory too scattered
        why = (f"its {elements} elements make {tiles} tiles, one BD each per "
               "source and destination (the leg is not split further: a smaller message "
               "or another engine lowers it)")
    else:
        why = ("its elements fall into too many contiguous runs (an SBUF access pattern "
               "of short rows)")
    return (f"a {leaf_name(leaf)} leg on channel {channel} needs {m2s} M2S and {s2m} S2M BDs, "
            f"at most {F.TPINC_MAX_BDS} of each in its tp_inc_steps record (TPINC_MAX_BDS): "
            f"{why}")


def _tpinc_steps(lg: _Legs, data: _Data) -> dict[tuple[int, int], np.ndarray]:
    """The batch's tp_inc_steps records: M2S / S2M BDs per leg, run-length encoded per
    channel, by (SPAD index, channel)."""
    n, leg_ci, m2s = lg.n, lg.leg_ci, data.m2s
    s2m = data.leg_bd_count - m2s
    if m2s.max() > F.TPINC_MAX_BDS or s2m.max() > F.TPINC_MAX_BDS:
        over = int(np.flatnonzero((m2s > F.TPINC_MAX_BDS) | (s2m > F.TPINC_MAX_BDS))[0])
        raise LimitError(tpinc_over_text(
            int(lg.leaf[over]), int(lg.seg_ch[leg_ci[over]]), int(m2s[over]), int(s2m[over]),
            int(lg.length[over]), int(data.n_tiles[over]), int(lg.s_n[over]),
            int(lg.d_n[over])))
    change = np.ones(n, bool)
    change[1:] = (m2s[1:] != m2s[:-1]) | (s2m[1:] != s2m[:-1])
    change[lg.leg_first_c] = True
    run_start = np.nonzero(change)[0]
    run_len = np.diff(np.append(run_start, n))
    r_idx, r_k, _ = _expand(-(-run_len // 0xFFFF))  # split runs longer than the u16 repeat
    tp = np.zeros(r_idx.size, F.TPINC_DTYPE)
    tp["m2s"] = m2s[run_start][r_idx]
    tp["s2m"] = s2m[run_start][r_idx]
    tp["repeat"] = np.minimum(run_len[r_idx] - r_k * 0xFFFF, 0xFFFF)
    tp_ci = leg_ci[run_start][r_idx]
    tp["flags"] = np.where(np.append(tp_ci[1:] != tp_ci[:-1], True), F.TPINC_LAST_SYNC, 0)
    bounds = np.nonzero(np.append(True, tp_ci[1:] != tp_ci[:-1]))[0]
    return {(lg.ctxs[lg.seg_e[i]].spad_index, int(lg.seg_ch[i])): part
            for i, part in zip(tp_ci[bounds].tolist(), np.split(tp, bounds[1:]))}


def _fifo_records(b: RankBuilder, bt: _Batch, lg: _Legs) -> list[tuple]:
    """The net-proxy FIFO records of every segment with network legs, one tuple per op in
    order, ``(entry, channel, net_ops_info, net_src entries, net_dest entries)``.

    Every op of the batch at once: the ops and their ``net_ops_info`` records
    (proxy_start_operation), the transmit entries of all transmitting legs (:func:`_net_tx`,
    __record_net_src_addr) and the receive entries of all receiving legs (:func:`_net_rx`,
    __record_net_dest_addr), each file in a few numpy passes (:func:`_entries_by_op`).  An
    op's entries are a view of the batch's record array, ``None`` when the op has no legs in
    that FIFO.  The terminators (proxy_end_operation) are added when the channel's files
    are written (:meth:`ChannelState.fifo`: the FIFO may get entries from a later batch)."""
    vt, seg_ch, seg_e, leg_ci, is_end = lg.vt, lg.seg_ch, lg.seg_e, lg.leg_ci, lg.is_end
    leg_tx, leg_rx = lg.sends_net, lg.net_src >= 0
    start, stop, dst_net, send_sem_c, recv_sem_c = (lg.start, lg.stop, lg.dst_net,
                                                    lg.send_sem_c, lg.recv_sem_c)
    # views and peers: the batch's
    dst_view, dst_peer, gw_leg = lg.dst_view_g, lg.dst_peer_g, lg.gw_g
    net_src, net_view, net_sem = lg.net_src + lg.poff, lg.net_view + lg.voff, lg.net_sem
    net_legs = np.flatnonzero(~is_end & (leg_tx | leg_rx))
    if not net_legs.size:
        return []
    # one op (net_ops_info) per run of a segment's network legs whose receives land on the
    # same semaphore (net_sem; 0 = the channel's recv_sema): the proxy increments the
    # receiving op's inc_recv_complete (docs/FORMATS.md §8); a ring channel is one op.  An
    # op starts with its segment or at a receiving leg whose semaphore differs from that of
    # the segment's previous receiving leg; legs that only transmit stay in the current op.
    seg = leg_ci[net_legs]
    rsem = np.where(net_sem[net_legs] != 0, net_sem[net_legs], recv_sem_c[seg])
    new_op = np.append(True, seg[1:] != seg[:-1])
    rx_at = np.flatnonzero(leg_rx[net_legs])
    new_op[rx_at[1:]] |= ((seg[rx_at[1:]] == seg[rx_at[:-1]])
                          & (rsem[rx_at[1:]] != rsem[rx_at[:-1]]))
    op_of_net = np.cumsum(new_op) - 1
    op_seg = seg[new_op]
    nops = op_seg.size
    op_sem = recv_sem_c[op_seg]  # an op without receives: the channel's recv_sema
    op_sem[op_of_net[rx_at]] = rsem[rx_at]  # (all receives of an op share it)
    op_ch, op_e = seg_ch[op_seg].tolist(), seg_e[op_seg].tolist()
    op_of_leg = np.full(is_end.size, -1, np.int64)
    op_of_leg[net_legs] = op_of_net
    # net_op_idx: the op's place among its basic block's net_ops_info records of the
    # channel (the runtime's per-block ops array, docs/FORMATS.md §8 "Basic blocks")
    op_bb = [bt.ctxs[e].subgraph_index for e in op_e]
    so_far: dict[int, tuple[int, int]] = {}  # channel -> (block, its ops so far)
    op_idx = []
    for c, bb in zip(op_ch, op_bb):
        last = so_far.get(c)
        if last is None:
            st = b.channels.get(c)
            last = (st.block[-1], st.idx[-1] + 1) if st is not None and st.ops else (-1, 0)
        k = last[1] if last[0] == bb else 0
        op_idx.append(k)
        so_far[c] = (bb, k + 1)
    op_idx = _ints(op_idx)

    # proxy_start_operation: the ops' net_ops_info records
    ctxs = [bt.ctxs[e] for e in op_e]
    info = np.zeros(nops, F.NET_OPS_INFO_DTYPE)
    info["sema_shift_offset"] = [c.sema_shift_offset for c in ctxs]
    inc = [(sema_address(c.me.logical_core, send, EVT_SEM_INC),
            sema_address(c.me.logical_core, recv, EVT_SEM_INC))
           for c, send, recv in zip(ctxs, send_sem_c[op_seg].tolist(), op_sem.tolist())]
    inc = np.array(inc, np.int64).reshape(nops, 2)
    info["inc_send_handshake"] = info["inc_send_complete"] = inc[:, 0]
    info["inc_recv_handshake"] = info["inc_recv_complete"] = inc[:, 1]
    info["net_idx_loop_size"] = F.NET_INDEX_LOOP_SIZE
    info["initial_send_credits"] = F.NET_INITIAL_SEND_CREDITS
    info["ending_recv_credits"] = F.NET_ENDING_RECV_CREDITS
    info["data_type_sz"] = [SDMA_DATA_TYPE_SIZE[c.dtype] for c in ctxs]
    info["basic_block_id"] = op_bb
    # the peer resolved per op (MESH and RDH: an op's entries name several peers), not
    # the channel's fixed ring neighbour (docs/FORMATS.md §8.1)
    info["variable_peer"] = [c.variable_peer for c in ctxs]
    info["func_rel_op_idx"] = [c.trigger for c in ctxs]
    info["unrolled_count"] = [c.groups for c in ctxs]
    info["enc_channel"] = op_ch

    # the entries of both FIFOs, per op
    me_core = np.zeros(is_end.size, np.int64)  # per network leg: this rank's core window
    me_core[net_legs] = _ints([core_base(c.me) for c in bt.ctxs])[seg_e[seg]]
    src, dest = [None] * nops, [None] * nops
    tx_legs = net_legs[leg_tx[net_legs]]
    if tx_legs.size:
        entries = _net_tx(bt, vt, me_core, tx_legs, start, stop, dst_view, dst_peer, dst_net,
                          gw_leg)
        src, info["tx_entry_cnt"] = _entries_by_op(F.NET_SRC_ADDR_DTYPE, tx_legs, op_of_leg,
                                                   op_idx, *entries)
    rx_legs = net_legs[leg_rx[net_legs]]
    if rx_legs.size:
        entries = _net_rx(bt, vt, me_core, rx_legs, start, stop, net_src, net_view)
        dest, info["rx_entry_cnt"] = _entries_by_op(F.NET_DEST_ADDR_DTYPE, rx_legs, op_of_leg,
                                                    op_idx, *entries)
    return [(e, c, info[k:k + 1], src[k], dest[k], int(op_idx[k]))
            for k, (e, c) in enumerate(zip(op_e, op_ch))]


def _advance_counters(b: RankBuilder, seg_ch: np.ndarray, counts: np.ndarray,
                      attr: str) -> np.ndarray:
    """A per-channel counter (``ChannelState`` attribute ``attr``) over a batch's segments:
    its value at the start of each segment (segment ``i`` adds ``counts[i]`` on channel
    ``seg_ch[i]``); the channels' counters are left after the batch."""
    base = []
    for c, cnt in zip(seg_ch.tolist(), counts.tolist()):
        st = b.state(c)
        base.append(getattr(st, attr))
        setattr(st, attr, base[-1] + cnt)
    return np.array(base, np.int64)


#: a 0xBF word as one opaque item (see :func:`_sb2sb_words`)
_SB2SB_ITEM = np.dtype(f"V{F.SB2SB_DTYPE.itemsize}")


def _sb2sb_words(ctxs: list[EntryContext], piece_entry: np.ndarray) -> np.ndarray:
    """The shared fields of every piece's 0xBF word (``piece_entry``: each piece's entry)."""
    keys = [(io_code(c.dtype), c.lnc_fmt, c.num_active_channels) for c in ctxs]
    distinct = list(dict.fromkeys(keys))
    if len(distinct) == 1:
        return np.repeat(_sb2sb_template(*keys[0]), piece_entry.size)
    # the distinct templates joined as opaque items (np.concatenate copies a structured
    # array field by field: a millisecond for a batch's 64 one-record templates), then
    # gathered whole per piece (np.take copies records as items)
    which = {k: i for i, k in enumerate(distinct)}
    joined = np.concatenate([_sb2sb_template(*k).view(_SB2SB_ITEM) for k in distinct])
    return np.take(joined.view(F.SB2SB_DTYPE), np.array([which[k] for k in keys],
                                                        np.int64)[piece_entry])


def _cce_tables(ctxs: list[EntryContext], leg_e: np.ndarray, leg_cce: np.ndarray):
    """(patterns, offset, each leg's first pattern): :func:`_cce_patterns` of the
    (dtype, cce_op) of every entry that has CCE descriptors (``leg_cce``: per leg), one
    after the other.

    An entry without any (an all-gather, or a batch's copy-only entries) is left out: a
    copy takes any dtype (SEED-NOTES "plain FP32 and integers"), and only a reduce's dtype
    has CCE nibbles.  Its legs' pattern index is 0, never read (their tiles have no CCE
    descriptor)."""
    reducing = np.bincount(leg_e, weights=leg_cce, minlength=len(ctxs)) > 0
    keys = [(c.dtype, c.cce_op) if r else None for c, r in zip(ctxs, reducing.tolist())]
    distinct = list(dict.fromkeys(k for k in keys if k is not None))
    pats = [_cce_patterns(*k) for k in distinct]
    offset = pats[0][1]
    if len(distinct) == 1:
        return pats[0][0], offset, None
    sizes = np.array([p.size for p, _ in pats], np.int64)
    first = np.cumsum(sizes) - sizes
    where = {None: 0, **{k: int(f) for k, f in zip(distinct, first.tolist())}}
    return np.concatenate([p for p, _ in pats]), offset, np.array(
        [where[k] for k in keys], np.int64)[leg_e]


#: Descriptors (data BDs + CCE) per emit block: a block's temporaries (a few arrays of
#: 8-byte values per descriptor) then fit the CPU cache (docs/PERFORMANCE.md).
EMIT_BLOCK = 1 << 17
#: Descriptors in the first block of a batch; the next blocks double up to EMIT_BLOCK.  The
#: writer thread hashes nothing until a block is appended, and before the first one the
#: emitter has done the batch's leg-level work: a small first block hands it bytes to hash
#: that much sooner.  Its BDs (some 0.3 MB) must reach RankBuilder.THREAD_BYTES, or they are
#: hashed inline and the thread starts with the second block (docs/PERFORMANCE.md).
EMIT_FIRST_BLOCK = 1 << 15


def _blocks(work: np.ndarray, size: int, first: int | None = None) -> list[tuple[int, int]]:
    """Consecutive leg ranges ``[l0, l1)`` of about ``size`` work each; with ``first``, the
    blocks grow from about ``first`` to ``size``, doubling (a leg bigger than a block is a
    range of its own; legs without work join their neighbours)."""
    n = work.size
    if n == 0:
        return []
    cw = np.cumsum(work)
    total = int(cw[-1])
    ramp, end = [], 0  # the growing blocks' ends; the last of them
    block = size if first is None else min(first, size)
    while block < size and end + block < total:
        end += block
        ramp.append(end)
        block *= 2
    if not ramp and total <= size:
        return [(0, n)]
    marks = np.concatenate([np.array(ramp, np.int64),
                            np.arange(end + size, total, size, dtype=np.int64)])
    cuts = np.searchsorted(cw, marks, side="left") + 1
    bounds = sorted({0, n, *np.minimum(cuts, n).tolist()})
    return list(zip(bounds[:-1], bounds[1:]))


def _tiles(l0: int, l1: int, n_tiles, per_tile, start, stop):
    """The tiles of legs ``[l0, l1)``: (leg index relative to ``l0``, first element, end)."""
    tl, k, _ = _expand(n_tiles[l0:l1])
    pt = per_tile[l0:l1][tl]
    ta = start[l0:l1][tl] + k * pt
    tb = np.minimum(ta + pt, stop[l0:l1][tl])
    return tl, ta, tb


class _GenTags:
    """The generation tag of each data BD: ``(position among the rank's data BDs of its
    channel // BD_RING_ENTRIES) & GEN_MASK``, OR-ed into ``len_ctrl`` block by block.

    The tag is constant over runs of BD_RING_ENTRIES positions, so it is applied to slices:
    no per-BD arithmetic.  Advances the channels' BD counters past the batch's BDs."""

    def __init__(self, b: RankBuilder, seg_ch: np.ndarray, seg_bd_count: np.ndarray):
        base = _advance_counters(b, seg_ch, seg_bd_count, "bd_count")
        end = np.cumsum(seg_bd_count)
        # (first BD of the segment in this batch, end, the channel's position at its start)
        self.ranges = list(zip((end - seg_bd_count).tolist(), end.tolist(), base.tolist()))
        self.k = 0  # first range not wholly tagged yet (blocks come in order)
        self.done = 0  # BDs of the batch tagged so far

    def apply(self, len_ctrl: np.ndarray) -> None:
        e0, e1 = self.done, self.done + len_ctrl.size
        while self.k < len(self.ranges) and self.ranges[self.k][1] <= e0:
            self.k += 1
        for first, end, base in self.ranges[self.k:]:
            if first >= e1:
                break
            a, z = max(first, e0), min(end, e1)
            while a < z:
                p = base + a - first
                nxt = min(z, a + F.BD_RING_ENTRIES - p % F.BD_RING_ENTRIES)
                tag = (p // F.BD_RING_ENTRIES) & F.GEN_MASK
                if tag:
                    len_ctrl[a - e0:nxt - e0] |= tag << F.GEN_SHIFT
                a = nxt
        self.done = e1


def _bds_linear(tile_leg, ta, tb, dsize, slots, lt_first, lt_word0, lt_addr) -> np.ndarray:
    """Data BDs when every buffer is linear (DRAM): one BD per stream of each tile, as an
    (n, 2) int64 array (the two 8-byte words of BD_DTYPE).

    Everything is affine in the tile's first element, so a BD is a leg-slot constant plus
    the tile's part: word 0 = flags | meta_ctrl << 32 | tile bytes, word 1 = the leg slot's
    address + ``ta * dsize``."""
    ts = slots[tile_leg]
    if ts.size and ts.min() == ts.max():  # every tile has k streams: (tiles, k) blocks
        k = int(ts[0])
        lt = lt_first[tile_leg][:, None] + np.arange(k, dtype=np.int64)
        words = np.empty((ts.size, k, 2), np.int64)
        np.bitwise_or(lt_word0[lt], (((tb - ta) * dsize) & F.LEN_MASK)[:, None],
                      out=words[:, :, 0])
        np.add(lt_addr[lt], (ta * dsize)[:, None], out=words[:, :, 1])
        return words.reshape(-1, 2)
    bd_first = np.cumsum(ts) - ts
    nb = int(bd_first[-1] + ts[-1]) if ts.size else 0
    lt = np.repeat(lt_first[tile_leg] - bd_first, ts) + np.arange(nb, dtype=np.int64)
    words = np.empty((nb, 2), np.int64)
    np.bitwise_or(lt_word0[lt], np.repeat(((tb - ta) * dsize) & F.LEN_MASK, ts), out=words[:, 0])
    np.add(lt_addr[lt], np.repeat(ta * dsize, ts), out=words[:, 1])
    return words


@functools.lru_cache(maxsize=64)
def _cce_patterns(dtype: DType, cce_op: int) -> tuple[np.ndarray, np.ndarray]:
    """Words 0 and 1 of the CCE descriptor of source ``k`` of ``n`` (one int64, w0 | w1 << 32),
    for every n <= MAX_SRC, flattened: pattern of n at ``offset[n]`` (read-only)."""
    in_dt, out_dt, acc_dt = cce_dtype_nibbles(dtype)
    w1 = (cce_op & 7) | (in_dt << 8) | (out_dt << 12) | (acc_dt << 16) | F.CCE_VALID
    offset = np.zeros(MAX_SRC + 1, np.int64)
    pat = []
    for n_src in range(1, MAX_SRC + 1):
        offset[n_src] = len(pat)
        pat += [(F.CCE_W0_META | (k << 24)) | ((w1 | (F.CCE_LAST if k == n_src - 1 else 0)) << 32)
                for k in range(n_src)]
    pat = np.array(pat, np.int64)
    pat.setflags(write=False)
    offset.setflags(write=False)
    return pat, offset


def _cce_block(tile_leg, ta, tb, dsize, leg_ns, leg_w3, tab) -> np.ndarray:
    """CCE descriptors of the given tiles: one per source of each reduce tile (``leg_ns``:
    the leg's sources if it reduces, else 0; ``leg_w3``: word 3 of its descriptors; ``tab``:
    :func:`_cce_tables`; ``dsize``: one for all tiles or each tile's)."""
    pat, offset, leg_pat = tab
    ns = leg_ns[tile_leg]
    w23 = (((tb - ta) * dsize) & 0xFFFFFF) | (leg_w3[tile_leg] << 32)
    if ns.size and ns.min() == ns.max() > 0:  # every tile reduces k sources: (tiles, k) blocks
        k = int(ns[0])
        words = np.empty((ns.size, k, 2), np.int64)
        if leg_pat is None:
            words[:, :, 0] = pat[offset[k]:offset[k] + k]
        else:
            words[:, :, 0] = pat[(leg_pat[tile_leg] + offset[k])[:, None] + np.arange(k)]
        words[:, :, 1] = w23[:, None]
        return words.reshape(-1, 2).view(F.CCE_DTYPE).reshape(-1)
    first = np.cumsum(ns) - ns
    nc = int(first[-1] + ns[-1]) if ns.size else 0
    words = np.empty((nc, 2), np.int64)
    base = offset[ns] if leg_pat is None else leg_pat[tile_leg] + offset[ns]
    np.take(pat, np.repeat(base - first, ns) + np.arange(nc, dtype=np.int64), out=words[:, 0])
    words[:, 1] = np.repeat(w23, ns)
    return words.view(F.CCE_DTYPE).reshape(-1)


def _bds_runs(views, n, tile_leg, ta, tb, lt_first, slots, lt_view, lt_peer, lt_meta, s_n,
              peer_off):
    """Data BDs when some buffer follows an SBUF access pattern: one BD per contiguous run."""
    si_tile, si_slot, _ = _expand(slots[tile_leg])
    si_lt = lt_first[tile_leg][si_tile] + si_slot
    si_view = lt_view[si_lt]
    si_a, si_b = ta[si_tile], tb[si_tile]
    run_count = np.zeros(si_lt.size, np.int64)
    found = []
    for v in np.unique(si_view):
        sel = np.nonzero(si_view == v)[0]
        owner_idx, addr, nbytes = views[int(v)].runs(si_a[sel], si_b[sel])
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
    if total and bd_len.max() > F.BD_MAX_BYTES:
        raise LimitError(f"a BD of {int(bd_len.max())} bytes exceeds {F.BD_MAX_BYTES}")
    bd_lt = si_lt[bd_stream]
    bd_tile = si_tile[bd_stream]
    tile_bd_count = np.bincount(bd_tile, minlength=tile_leg.size)
    tile_bd_first = np.cumsum(tile_bd_count) - tile_bd_count
    pos_in_tile = np.arange(total, dtype=np.int64) - tile_bd_first[bd_tile]
    bds = np.empty(total, F.BD_DTYPE)
    bds["len_ctrl"] = ((bd_len & F.LEN_MASK) | np.where(pos_in_tile == 0, F.LEN_FIRST, 0)
                       | np.where(pos_in_tile == tile_bd_count[bd_tile] - 1, F.LEN_LAST, 0))
    bds["meta_ctrl"] = lt_meta[bd_lt]
    bds["buf_ptr"] = bd_addr + peer_off[lt_peer[bd_lt]]
    bd_leg = tile_leg[bd_tile]
    leg_bd_count = np.bincount(bd_leg, minlength=n)
    is_src = (lt_meta[bd_lt] & F.META_DIR_S2M) == 0
    return bds, leg_bd_count, np.bincount(bd_leg[is_src], minlength=n)


def entry_handshake(ir: np.ndarray, ctx: EntryContext, net_peer: np.ndarray
                    ) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """The entry handshake (COMPLETE) in front of an entry's IR rows, channel by channel:
    ``(channel, handshake rows, the channel's IR rows)`` in program order (a channel's
    rows in IR order; the composers group them by channel already).

    A rank must not touch a peer's memory for this entry (write into it, or read it) before
    the peer has started the entry: then the peer has finished every earlier entry (its
    reads and writes of the buffers this entry may reuse) and its engines have kicked this
    trigger.  So the entry starts with a handshake with every same-node sync peer: the
    first (leader) channel increments ``ctx.entry_post_sem`` (``SEM_ENTRY_POST`` or another
    slot of :data:`nrtrewrite.entryslots.ENTRY_POST_SEMS`, the trigger's) on each peer ("I
    have started"), waits for as many posts from them, then releases the entry's other
    channels with ``inc(SEM_ENTRY_DONE, channels - 1)``; each other channel first waits
    ``SEM_ENTRY_DONE >= 1``.  Network peers are not part of it: a network receive is posted
    when the receiver starts the entry (docs/FORMATS.md §8.2).  Rows are
    ``Leaf.mark_complete``.
    """
    if not ir.size:
        return []
    peers = ctx.sync_peers if ctx.sync_peers is not None else range(1, len(ctx.peers))
    peers = [p for p in dict.fromkeys(peers) if p != 0 and not net_peer[p]]
    ch_all = ir["channel"]
    run_first = np.flatnonzero(np.concatenate(([True], ch_all[1:] != ch_all[:-1])))
    run_ch = ch_all[run_first].tolist()
    order = list(dict.fromkeys(run_ch))
    if len(run_ch) == len(order):  # each channel's rows are one run (the composers' order)
        bounds = zip(run_first.tolist(), run_first[1:].tolist() + [ir.size])
        rows = [ir[a:z] for a, z in bounds]
    else:  # one stable gather by channel (first-appearance order), then split
        rank = np.zeros(int(ch_all.max()) + 1, np.int64)
        rank[order] = np.arange(len(order))
        by_channel = IR.take(ir, np.argsort(rank[ch_all], kind="stable"))
        counts = np.bincount(rank[ch_all], minlength=len(order))
        rows = np.split(by_channel, np.cumsum(counts)[:-1])
    if len(order) == 1 and not peers:
        return [(order[0], ir[:0], rows[0])]
    lead, go = _handshake_rows(tuple(peers), len(order), ctx.entry_post_sem)
    return [(ch, lead if i == 0 else go, r) for i, (ch, r) in enumerate(zip(order, rows))]


@functools.lru_cache(maxsize=64)
def _sb2sb_template(io: int, lnc_fmt: int, active_channels: int) -> np.ndarray:
    """The fields every 0xBF word of an entry shares (one record, read-only)."""
    word = np.zeros(1, F.SB2SB_DTYPE)
    word["opcode"] = int(Opcode.SB2SB_COLLECTIVE)
    word["inst_word_len"] = 16
    word["in_dtype"] = word["out_dtype"] = io
    for part in ("src", "dst"):
        word[part]["step_elem"][:, 0] = 1
        word[part]["step_elem"][:, 1] = F.T3D_DIM_CAP
        word[part]["num_elem"][:, 2] = 1
    word["lnc_size_fmt"] = lnc_fmt
    word["num_active_channels"] = active_channels
    word.setflags(write=False)
    return word


@functools.lru_cache(maxsize=1024)
def _handshake_rows(peers: tuple[int, ...], nch: int, post_sem: int = SEM_ENTRY_POST
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The handshake rows of :func:`entry_handshake`: the leader channel's (posts to
    ``peers`` on ``post_sem``, at most MAX_INC a row, then its wait and the release of the
    ``nch - 1`` other channels) and the release wait of every other channel (read-only)."""
    posts = [peers[i:i + MAX_INC] for i in range(0, len(peers), MAX_INC)]
    lead = IR.empty(len(posts) + (1 if peers or nch > 1 else 0))
    for r, chunk in enumerate(posts):
        lead["n_inc"][r] = len(chunk)
        lead["inc_peer"][r, :len(chunk)] = chunk
        lead["inc_sem"][r, :len(chunk)] = post_sem
        lead["inc_val"][r, :len(chunk)] = 1
    if peers or nch > 1:
        if peers:
            lead["n_wait"][-1] = 1
            lead["wait_sem"][-1, 0], lead["wait_val"][-1, 0] = post_sem, len(peers)
        if nch > 1:
            lead["n_inc"][-1] = 1
            lead["inc_peer"][-1, 0], lead["inc_sem"][-1, 0] = 0, SEM_ENTRY_DONE
            lead["inc_val"][-1, 0] = nch - 1
    go = IR.empty(1)
    go["n_wait"], go["wait_sem"][0, 0], go["wait_val"][0, 0] = 1, SEM_ENTRY_DONE, 1
    for rows in (lead, go):
        rows["leaf"] = int(Leaf.mark_complete)
        rows["keep"] = 1
        rows.setflags(write=False)
    return lead, go


def _check_counts(ir: np.ndarray) -> None:
    if ir.size and (ir["n_src"].max() > MAX_SRC or ir["n_dst"].max() > MAX_DST
                    or ir["n_wait"].max() > MAX_WAIT or ir["n_inc"].max() > MAX_INC):
        raise LoweringError("a leg has more sources, destinations, waits or increments than "
                            "the leg IR holds")


def _check_legs(nv, npeer, s_n, d_n, src_view, src_peer, dst_view, dst_peer, reduce, i_n,
                i_peer, net_src, net_view) -> None:
    """The IR's references and shapes, on the legs' columns (handshake and mark_end legs
    included: they have neither sources nor destinations); ``nv``, ``npeer``: the number of
    views and peers of each leg's entry.  In a batch the entries' tables are joined, so a
    reference one past its own entry's table would name the next entry's view or peer:
    every one is checked against its own entry."""
    for field_, count, view, peer in (("src", s_n, src_view, src_peer),
                                      ("dst", d_n, dst_view, dst_peer)):
        if view.size and view.max() < nv.min() and peer.max() < npeer.min():
            continue  # every slot (used or not) is in range
        bad = (view >= nv[:, None]) | (peer >= npeer[:, None])
        if (bad & (_SLOT_INDEX[:view.shape[1]] < count[:, None])).any():
            raise LoweringError(f"a leg names a {field_} view or peer that the entry lacks")
    if i_peer.size and i_peer.max() >= npeer.min():
        used = _SLOT_INDEX[:i_peer.shape[1]] < i_n[:, None]
        if (used & (i_peer >= npeer[:, None])).any():
            raise LoweringError("a leg increments a semaphore on a peer that the entry lacks")
    rx = net_src >= 0
    if rx.any() and ((net_src[rx] >= npeer[rx]) | (net_view[rx] >= nv[rx])).any():
        raise LoweringError("a leg has a network receive from a peer or into a view that the "
                            "entry lacks")
    if ((s_n == 0) & (d_n > 0)).any():
        raise LoweringError("a leg with destinations needs a source")
    if (reduce & (s_n > 32)).any():
        raise LimitError("a CCE reduce reads at most 32 sources")


def _terminators(dtype: np.dtype, op_idx, rank_field: str) -> np.ndarray:
    """proxy_end_operation's stop marks, one per ``op_idx``: net_op_idx = count-1, size 0,
    NET_OP_COMPLETE, the rank field -1, everything else 0 (docs/FORMATS.md §8
    "Terminator")."""
    rec = np.zeros(len(op_idx), dtype)
    rec["net_op_idx"] = op_idx
    rec["size"] = 0
    rec["mark"] = int(NetAddrMark.NET_OP_COMPLETE)
    rec[rank_field] = -1
    return rec


def _exec_complete(dtype: np.dtype, op_idx: int, rank_field: str) -> np.ndarray:
    """The end of a basic block's FIFO segment: one entry with mark EXEC_COMPLETE,
    net_op_idx = the block's last op (``op_idx``), size 0, the rank field -1, everything
    else 0 (docs/FORMATS.md §8 "Basic blocks")."""
    rec = _terminators(dtype, [op_idx], rank_field)
    rec["mark"] = int(NetAddrMark.EXEC_COMPLETE)
    return rec


def _terminator(dtype: np.dtype, op_idx: int, rank_field: str) -> np.ndarray:
    """One op's terminator (:func:`_terminators`)."""
    return _terminators(dtype, [op_idx], rank_field)


def _runs(views: list[BufferView], vt, view: np.ndarray, a: np.ndarray, b: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:meth:`BufferView.runs` of many element ranges, range ``i`` = [a[i], b[i]) of
    ``views[view[i]]``: (owner, address, bytes), ordered by owner, each owner's runs as its
    view gives them.  Linear views in one pass over ``vt`` (:meth:`ViewList.tables`)."""
    linear, vbase, vdsize = vt
    lin = linear[view]
    idx = np.arange(a.size, dtype=np.int64)
    parts = [(idx[lin], vbase[view[lin]] + a[lin] * vdsize[view[lin]],
              (b[lin] - a[lin]) * vdsize[view[lin]])]
    if not lin.all():  # SBUF access patterns: one call per view
        for v in np.unique(view[~lin]).tolist():
            sel = np.flatnonzero(view == v)
            owner, addr, nbytes = views[v].runs(a[sel], b[sel])
            parts.append((sel[owner], addr, nbytes))
    if len(parts) == 1:
        return parts[0]
    owner, addr, nbytes = (np.concatenate(col) for col in zip(*parts))
    order = np.argsort(owner, kind="stable")  # an owner's runs all come from one part
    return owner[order], addr[order], nbytes[order]


def _addresses(views: list[BufferView], vt, view: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``views[view[i]].address(e[i])`` for every ``i`` (linear views from ``vt``)."""
    linear, vbase, vdsize = vt
    out = vbase[view] + e * vdsize[view]
    lin = linear[view]
    if not lin.all():
        for v in np.unique(view[~lin]).tolist():
            sel = view == v
            out[sel] = views[v].address(e[sel])
    return out


def _last_of_owner(owner: np.ndarray) -> np.ndarray:
    """True on the last run of each owner (``owner`` sorted)."""
    last = np.ones(owner.size, bool)
    last[:-1] = owner[1:] != owner[:-1]
    return last


def _net_tx(bt: _Batch, vt, me_core, legs: np.ndarray, start, stop, dst_view, dst_peer,
            dst_net, gw_leg) -> tuple[np.ndarray, dict]:
    """__record_net_src_addr (on a ring leaf's step, seed 003 §4's
    ``__record_net_src_direct_addr``: the next hop across the network) of a batch's
    transmitting ``legs`` (ascending): per leg, per network destination slot ``jd`` in
    order, one entry per contiguous run of the destination's elements, read from our
    gateway copy (views and peers: the batch's;
    ``me_core``: per leg, the base of this rank's core window).  Returns each entry's leg
    and the entries' fields, in (leg, slot, run) order."""
    pt = bt.pt
    li, jd = np.nonzero(dst_net[legs])  # by leg, then slot
    leg = legs[li]
    view = dst_view[leg, jd]
    owner, addr, nbytes = _runs(bt.views, vt, view, start[leg], stop[leg])
    # each run's first element: its leg's start plus the elements of the earlier runs
    run_elems = nbytes // vt[2][view[owner]]
    csum = np.cumsum(run_elems) - run_elems
    _o, _w, first = _expand(np.bincount(owner, minlength=leg.size))
    elem = start[leg][owner] + csum - csum[first[owner]]
    rec_leg = leg[owner]
    peer = dst_peer[leg, jd][owner]
    return rec_leg, {
        "complete": _last_of_owner(owner),
        "dev_addr": _addresses(bt.views, vt, gw_leg[rec_leg], elem) + me_core[rec_leg],
        "size": nbytes, "dst_rank": pt.rank[peer], "dst_addr": addr + pt.core[peer]}


def _net_rx(bt: _Batch, vt, me_core, legs: np.ndarray, start, stop, net_src, net_view
            ) -> tuple[np.ndarray, dict]:
    """__record_net_dest_addr of a batch's network-fed ``legs`` (ascending): where each
    leg's bytes land on this rank, a run at a time (views and peers: the batch's).  Returns
    each entry's leg and the entries' fields, in (leg, run) order."""
    owner, addr, nbytes = _runs(bt.views, vt, net_view[legs], start[legs], stop[legs])
    rec_leg = legs[owner]
    return rec_leg, {
        "complete": _last_of_owner(owner), "dev_addr": addr + me_core[rec_leg],
        "size": nbytes, "src_rank": bt.pt.rank[net_src[rec_leg]]}


def _entries_by_op(dtype: np.dtype, legs: np.ndarray, op_of_leg, op_idx, rec_leg: np.ndarray,
                   fields: dict) -> tuple[list, np.ndarray]:
    """One FIFO file's entries of a batch's ops: those of its ``legs`` (``rec_leg``: each
    entry's leg, ascending; ``fields``: their columns); ``op_of_leg``: each leg's op;
    ``op_idx``: each op's net_op_idx.  Returns, per op, its entries (a view, possibly empty,
    when the op has any of ``legs``; else ``None``) and its number of entries.

    Built zeroed, then set a field at a time (never by copying or fancy indexing records:
    numpy may leave the padding of such copies undefined)."""
    used = np.bincount(op_of_leg[legs], minlength=op_idx.size) > 0
    rec_op = op_of_leg[rec_leg]
    counts = np.bincount(rec_op, minlength=used.size)
    rec = np.zeros(rec_leg.size, dtype)
    rec["net_op_idx"] = op_idx[rec_op]
    for name, val in fields.items():
        rec[name] = val
    rec["mark"] = int(NetAddrMark.NET_TRANSFER)
    ends = np.cumsum(counts)
    arrays = [rec[end - cnt:end] if u else None
              for end, cnt, u in zip(ends.tolist(), counts.tolist(), used.tolist())]
    return arrays, counts
