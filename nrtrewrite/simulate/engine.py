"""The simulator proper: every rank's legs and every net-proxy transfer, run by a seeded random
scheduler over numpy byte memories, with happens-before checking (docs/SIMULATOR.md).

Actors: a leg queue per (rank, entry, channel) and a proxy per (rank, channel).  An actor is
runnable when the semaphores its next step waits on hold enough; the scheduler picks one
runnable actor at random (``random.Random(seed)``), runs one step, and re-evaluates the
actors blocked on any semaphore that step incremented.  No runnable actor while work remains
is a deadlock.
"""

from __future__ import annotations

import gc
import mmap
import os
import random
import time
from bisect import bisect_right
from collections import deque
from pathlib import Path

import numpy as np

from nrtrewrite import codes
from nrtrewrite.codes import DType, SdmaCceType
from nrtrewrite.errors import (NrtRewriteError, OutputError, SimulationError, cut_line,
                               escape_controls, json_text, temporary_name)
from nrtrewrite.emit import formats as F
from nrtrewrite.emit.formats import rank_dir_name
from nrtrewrite.entryslots import ENTRY_POST_SEMS
from nrtrewrite.simulate.artifacts import (
    load_rank_files, read_output_files, read_rank_values, read_rewritten_neff,
    read_top_manifest, read_top_values)
from nrtrewrite.simulate.fifo import FifoDecoder, Transfer
from nrtrewrite.simulate.memguard import (MemoryGuard, check_operands_fit, floors_of_specs,
                                          resident_bytes)
from nrtrewrite.simulate.program import (
    CCE_OPS, LEAF_NAMES, SEM_ENTRY_GO, SEM_EVENT_BASE, SEM_PEER_BASE, Entry, Leg, LegName,
    QueueLegs, RankProgram, check_ring_pairing, decode_rank, resolve_event_holds, sem_name,
)
from nrtrewrite.simulate.result import (
    ERROR, INCOMPLETE, MATCH, MISMATCH, NOT_RUN, SimulationResult, TriggerResult,
)
from nrtrewrite.simulate.shadow import Access, Conflict, Shadow
from nrtrewrite.simulate.testdata import Reference, check_seed, make_input
from nrtrewrite.simulate.triggers import (
    TriggerSpec, check_against_model, check_buffers, check_chunk_groups, check_device_links,
    check_hier_groups, check_kangaring_units, check_options, check_own_legs, check_triggers,
    covers, merge_intervals)
from nrtrewrite.simulate.wiring import unproven as unproven_wiring

SEM_MAX = (1 << 32) - 1
_UFUNC = {SdmaCceType.ADD: np.add, SdmaCceType.MAX: np.maximum, SdmaCceType.MIN: np.minimum}
_TIE_OPS = (SdmaCceType.MAX, SdmaCceType.MIN)  # (their +0 / -0 tie: SIMULATOR.md §4)


def _check_overlapping_streams(leg, dsts: list, data: np.ndarray,
                               region_name) -> None:
    """The destination streams of one tile (or of a whole leg) that write the same bytes
    must write the same values there: the DMA engine gives a tile's streams no order, so
    where they differ the result is whichever lands last (a gateway view written once per
    network destination, one stream shifted by a byte, simulated as a match until
    2026-12-04: the later streams wrote over it).  ``dsts``: per stream, runs ``(rank,
    region, offset, bytes)`` in data order, each stream writing ``data`` whole;
    ``region_name(reg)`` names a region for the error."""
    placed: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}  # -> (a, e, pos, k)
    for k, runs in enumerate(dsts):
        pos = 0
        for r, reg, off, n in runs:
            for a, e, p0, j in placed.get((r, reg), ()):
                lo, hi = max(a, off), min(e, off + n)
                if lo < hi and not np.array_equal(data[p0 + lo - a:p0 + hi - a],
                                                  data[pos + lo - off:pos + hi - off]):
                    raise SimulationError(
                        f"{leg.who()} writes bytes [{lo:#x}, {hi:#x}) of rank {r} "
                        f"{region_name(reg)} through destination streams {j} and {k} with "
                        "different values: a "
                        "tile's destination streams land in no fixed order (docs/SIMULATOR.md "
                        "§3)", rank=leg.rank, trigger=leg.trigger, artifact="legs.bin",
                        record=leg.record)
            placed.setdefault((r, reg), []).append((off, off + n, pos, k))
            pos += n


def _merged(runs: list) -> list[tuple[int, int, list[tuple[int, int]]]]:
    """``(rank, region, ranges)`` of the bytes ``runs`` (``(rank, region, offset, bytes)``,
    in data order) touch, for the shadow: per (rank, region), the ``[start, end)`` ranges
    ascending, the touching and overlapping runs joined.  One access checked over a joined
    range is the same as over its pieces, and a pattern of many short runs (an SBUF operand
    walked backward: a run per element) no longer cuts the shadow's run map at every
    element boundary; the ranges that stay apart (a strided operand) go to the shadow in one
    call (:meth:`Shadow.read_many`, :meth:`Shadow.write_many`; docs/PERFORMANCE.md "SBUF
    operands with many runs")."""
    if len(runs) == 1:
        r, reg, off, n = runs[0]
        return [(r, reg, [(off, off + n)])] if n > 0 else []
    out: list[tuple[int, int, list[tuple[int, int]]]] = []
    for r, reg, off, n in sorted(runs):
        if n <= 0:
            continue
        if not out or out[-1][0] != r or out[-1][1] != reg:
            out.append((r, reg, [(off, off + n)]))
            continue
        ivs = out[-1][2]
        if off <= ivs[-1][1]:
            if off + n > ivs[-1][1]:
                ivs[-1] = (ivs[-1][0], off + n)
        else:
            ivs.append((off, off + n))
    return out


#: a (rank, region) buffer of at least this many bytes is an anonymous mapping of its own
MAPPED_BYTES = 1 << 20


def _zeroed(size: int) -> np.ndarray:
    """``size`` zero bytes for a (rank, region) buffer: from :data:`MAPPED_BYTES` up an
    anonymous mapping of its own rather than malloc's, so that its pages are made only where
    it is written and go back to the system when it is freed (docs/SIMULATOR.md §3
    "Memory").  glibc raises its mmap threshold to the largest block freed (up to 32 MiB):
    once a trigger's buffers were freed, the next ones of up to 32 MiB came from the heap,
    where calloc zeroes them whole, every page made, and freed they stayed with the process
    (until 2026-12-06: ``two_node128``'s run held 4.5 GB of freed heap at its end)."""
    if size < MAPPED_BYTES:
        return np.zeros(size, np.uint8)
    # private, as np.zeros' memory is: mmap's default for -1 is MAP_SHARED, whose pages a
    # forked child would write into the parent's (and count as Shmem)
    return np.frombuffer(mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE), np.uint8)


#: the unit in which a mapped buffer's bytes go back to the system (:meth:`Simulator._release`)
PAGE = mmap.PAGESIZE
#: the methods that build a rank's executable legs: a program whose own are others (a test's
#: hook, which may change a leg's byte runs) gives no page back early (:func:`_pristine`)
_LEGS_OF, _BUILD_LEGS = RankProgram.legs_of, RankProgram.build_legs


def _pristine(prog: RankProgram) -> bool:
    """Whether ``prog``'s legs are built from its decoded byte runs as decoded: the runs
    each access of the run still to come is counted from (:meth:`Simulator._page_counts`)."""
    return (getattr(prog.legs_of, "__func__", None) is _LEGS_OF
            and getattr(prog.build_legs, "__func__", None) is _BUILD_LEGS)


def _drop_pages(buf: np.ndarray, lo: int, hi: int) -> None:
    """Pages ``[lo, hi)`` of a mapped buffer (:func:`_zeroed`) given back to the system: they
    read as zeros again, and take memory again only where they are written."""
    buf.base.obj.madvise(mmap.MADV_DONTNEED, lo * PAGE, (hi - lo) * PAGE)


def _clear(buf: np.ndarray, lo: int, hi: int) -> None:
    """Bytes ``[lo, hi)`` of a buffer zeroed: a mapped buffer's whole pages among them given
    back to the system (zeros again, as :func:`_drop_pages` leaves them), not written."""
    p0, p1 = -(-lo // PAGE), hi // PAGE
    if buf.nbytes < MAPPED_BYTES or p1 <= p0:
        buf[lo:hi] = 0
        return
    buf[lo:p0 * PAGE] = 0
    _drop_pages(buf, p0, p1)
    buf[p1 * PAGE:hi] = 0


def _describe(acc: Access | None) -> str:
    if acc is None:
        return "nobody"
    w = _who(acc)
    return w.who() if hasattr(w, "who") else str(w)


def _who(acc: Access):
    """What ``acc`` names: a leg's packed name unpacked (:meth:`LegName.of`), else as kept."""
    return LegName.of(acc.who) if acc.kind == Access.LEG else acc.who


def _kick(word: bytes) -> np.void:
    """A 64-byte instruction word read as a TOPSP_KICK record (``F.KICK_DTYPE``)."""
    return np.frombuffer(word, F.KICK_DTYPE)[0]


class _Queue:
    """The leg program of one channel of one entry of one rank."""

    __slots__ = ("rank", "entry", "channel", "legs", "take", "cur", "n", "pos", "tid", "need",
                 "done_vc", "slot")

    def __init__(self, rank: int, entry: Entry, channel: int, tid: int, legs):
        self.rank = rank
        self.entry = entry
        self.channel = channel
        self.legs = legs  # a QueueLegs (or, from a test's hook, a list)
        # the leg at a position, forgotten by the queue (a QueueLegs frees it once taken)
        self.take = legs.take if isinstance(legs, QueueLegs) else legs.__getitem__
        self.cur = None  # the leg at pos, once taken (run, then dropped)
        self.n = len(legs)
        self.pos = 0
        self.tid = tid
        self.need = None
        self.done_vc = None
        self.slot = -1

    @property
    def finished(self) -> bool:
        return self.pos >= self.n

    def compute_need(self):
        waits: dict[tuple[int, int], int] = {}
        if self.cur is None:
            self.cur = self.take(self.pos)
        for r, s, v in self.cur.waits:
            waits[(r, s)] = waits.get((r, s), 0) + v
        self.need = list(waits.items())

    def describe(self) -> str:
        if self.finished:
            return f"rank {self.rank} entry {self.entry.index} channel {self.channel}: finished"
        leg = self.cur if self.cur is not None else self.legs[self.pos]
        return (f"rank {self.rank} entry {self.entry.index} channel {self.channel} step {leg.step} "
                f"({LEAF_NAMES.get(leg.leaf, leg.leaf)})")


class _Proxy:
    """The net proxy of one channel of one rank: its transmit FIFO, in order."""

    __slots__ = ("rank", "channel", "transfers", "pos", "tid", "need", "slot")

    def __init__(self, rank: int, channel: int, transfers: list[Transfer], tid: int):
        self.rank = rank
        self.channel = channel
        self.transfers = transfers
        self.pos = 0
        self.tid = tid
        self.need = None
        self.slot = -1

    @property
    def finished(self) -> bool:
        return self.pos >= len(self.transfers)

    def compute_need(self):
        t = self.transfers[self.pos]
        self.need = [] if (t.terminator or not t.first) else [(t.handshake, 1)]

    def describe(self) -> str:
        if self.finished:
            return f"net proxy rank {self.rank} channel {self.channel}: finished"
        t = self.transfers[self.pos]
        return (f"net proxy rank {self.rank} channel {self.channel} net_src.bin record {t.record} "
                f"(to rank {t.receiver})")


class _RankState:
    __slots__ = ("prog", "entry", "queues", "pending", "drain_need", "drained", "ctrl_tid",
                 "finished", "started")

    def __init__(self, prog: RankProgram, ctrl_tid: int):
        self.prog = prog
        self.entry = -1
        self.queues: dict[int, _Queue] = {}
        self.pending: set = set()  # channels (and ('drain', ch)) the current entry still needs
        self.drain_need: dict[int, set[int]] = {}  # entry -> channels whose proxy must drain
        self.drained: dict[tuple[int, int], np.ndarray] = {}  # (entry, ch) -> proxy clock
        self.ctrl_tid = ctrl_tid
        self.finished = False
        self.started: dict[int, np.ndarray] = {}  # entry -> control clock when it started


class Simulator:
    """Run an output folder.  ``run()`` returns a :class:`SimulationResult`; protocol errors
    become the result's ``error`` (and the failing trigger's verdict)."""

    def __init__(self, out: str | Path, *, seed: int = 0, progress=None, model=None,
                 memory_check: bool = True, names_within: str | Path | None = None,
                 given: str | None = None):
        self.out = Path(out)
        #: the folder as the user gave it (``simulate OUT``), whose form the result's error
        #: names its file in (NrtRewriteError.named_as), or None
        self.given = given
        #: the folder the result's error names its file relative to (NrtRewriteError's
        #: named_within: simulate MODEL.neff's temporary folder), and its output, or None
        self.names_within = names_within
        self.out_name = str(self.out)
        self.model = model  # the input model, when known: the manifest's triggers must be its
        self.seed = check_seed(seed)
        #: refuse a run whose operands cannot fit, stop one before the system runs out
        #: (:mod:`nrtrewrite.simulate.memguard`)
        self.memory_check = memory_check
        self.guard = MemoryGuard(False)
        #: the floors the memory check weighed and the resident size then (the second check,
        #: once the programs are decoded: :meth:`check_programs_fit`)
        self._floors: list = []
        self._resident: int | None = None
        self.progress = progress
        self.rng = random.Random(seed)

    # ------------------------------------------------------------------ setup
    def load_manifest(self) -> None:
        """OUT/manifest.json: memory map, topology, triggers (OutputError if not an output),
        and the rank manifests.  Every value of every manifest is read with its type checked
        (status 2) before any is checked for what it says (status 1), so the status does not
        depend on which key or file holds which fault."""
        self.top = read_top_manifest(self.out)
        fname = str(self.out / "manifest.json")
        # the keys of the checksums first, then the rest of the top manifest, in the checksum
        # pass's order (typed also with --ignore-checksums, which compares none of them:
        # FORMATS §1.1), so faulty keys, or a faulty key and a rank folder gone, are named
        # alike with and without the option
        sums, self.layout, typed_triggers = read_top_values(self.out, self.top)
        self.ranks, self._neff_path = sums[:2]
        self.n_ranks = len(self.ranks)  # (stats' ranks: the output's, decoded or not)
        # in the checksum pass's order (docs/SIMULATOR.md §1), so that the first fault is
        # named alike with and without --ignore-checksums: every rank folder and manifest
        # there, the rewritten NEFF there, rank by rank the manifest's ``files`` rows and the
        # artifacts there, then every rank's other keys (the values are checked after all)
        files = read_output_files(self.out, self.ranks, self._neff_path)
        self.rank_manifests = {r: read_rank_values(files[r]) for r in sorted(self.ranks)}
        # what the values say
        self.layout.check()
        self.triggers: dict[int, TriggerSpec] = check_triggers(typed_triggers)
        check_hier_groups(self.triggers, self.layout)  # (the topology's nodes)
        check_device_links(self.triggers, self.layout)  # (the recorded links)
        check_kangaring_units(self.triggers, self.layout)  # (the ranks' s-engines)
        self.group_set = {t.ordinal: frozenset(t.group) for t in self.triggers.values()}
        if self.model is not None:
            check_against_model(self.triggers, self.model, file=fname)
        for t in self.triggers.values():  # each operand in its var, from the numbers alone
            try:
                t.place(self.layout)
            except SimulationError as exc:
                raise exc.at(file=fname) from None
        # (the memory map's regions; after the operands: a HIER leg's buffers sit at spaces
        # of num_elements, so a num_elements its operands refuse was blamed on a buffer's
        # offset, until 2026-12-05)
        check_buffers(self.triggers, self.layout)
        check_chunk_groups(self.triggers)
        # (the legs and options after the buffers: an older HIER output's are told "lower
        # the model again" there, status 2, before what its options then meant is held)
        check_own_legs(self.triggers, self.layout)  # (a mesh leg's sub_type: the nodes)
        check_options(self.triggers, self.layout)  # (--algo: the engines it leaves)
        if self.memory_check:
            self._floors = floors_of_specs(self.triggers, self.layout)
            check_operands_fit(self._floors, file=self.out_name)
            self._resident = resident_bytes()  # (before the programs: check_programs_fit)
            self.guard = MemoryGuard(True)

    def check_programs_fit(self) -> None:
        """The memory check again once the programs are decoded (:meth:`load`): the largest
        floor with what the process took since :meth:`load_manifest`'s check (the decoded
        programs, which the first check cannot weigh: 160 - 320 MB on the large outputs),
        against the memory available now (docs/SIMULATOR.md §3 "Memory")."""
        if not self.memory_check:
            return
        now = resident_bytes()
        took = 0 if now is None or self._resident is None else now - self._resident
        check_operands_fit(self._floors, file=self.out_name, programs=took)

    def load(self) -> None:
        fname = str(self.out / "manifest.json")
        ranks = self.ranks
        for r in ranks:
            if r not in self.layout.places:
                raise SimulationError(f"rank {r} is not in the topology table", file=fname,
                                      field="topology")
        self.sg_index = self._subgraph_index()
        self.files = {r: load_rank_files(self.out, self.rank_manifests.pop(r))
                      for r in ranks}
        self.programs: dict[int, RankProgram] = {}
        for r in ranks:
            self.guard.check(self.out_name)
            try:
                self.programs[r] = decode_rank(self.layout, self.triggers, self.files[r])
            except (SimulationError, OutputError) as exc:  # (an older output's: status 2)
                raise exc.at(file=str(self.out / rank_dir_name(r))) from None
        try:  # a 0xBF word's event wait against its leg's (RankProgram.event_hold)
            left = resolve_event_holds(self.programs)
        except SimulationError as exc:
            raise exc.at(file=str(self.out / rank_dir_name(exc.where.rank))) from None
        fifos = FifoDecoder(self.layout, self.programs, self.files, self.sg_index)
        try:
            self.transfers = fifos.decode()
        except SimulationError as exc:  # named by its rank folder, as the decoders' errors
            if left:  # the held disagreement first: the FIFO's may follow from it
                self._resolve_event_holds(fifos.recv_increments(partial=True))
            if exc.where.rank is not None and exc.where.file is None:
                exc.at(file=str(self.out / rank_dir_name(exc.where.rank)))
            raise
        if left:  # an event the network lands on: weighed with the proxy's increments
            self._resolve_event_holds(fifos.recv_increments())
        try:
            check_ring_pairing(self.programs)
        except SimulationError as exc:
            raise exc.at(file=str(self.out / rank_dir_name(exc.where.rank))) from None
        for r in ranks:  # the checks that wait for the pairing (RankProgram.late_error)
            if self.programs[r].late_error is not None:
                raise self.programs[r].late_error.at(file=str(self.out / rank_dir_name(r)))
        self.files = {}  # the decoded programs hold everything the run needs

    def _resolve_event_holds(self, net: dict | None) -> None:
        """resolve_event_holds once the FIFOs are read: ``net`` the net proxy's increments
        (None where the FIFOs cannot tell them: both records are named)."""
        try:
            resolve_event_holds(self.programs, net, defer=False)
        except SimulationError as exc:
            raise exc.at(file=str(self.out / rank_dir_name(exc.where.rank))) from None

    def _subgraph_index(self) -> dict[str, int] | None:
        """Subgraph order of the rewritten NEFF (net_ops_info.basic_block_id); kick words."""
        from nrtrewrite.neff.reader import read_model_bytes

        path = self._neff_path
        try:
            # a file that cannot be read (missing, not a regular file: a FIFO is not waited
            # on) is an OutputError: no verdict (status 2), as for an artifact
            model = read_model_bytes(read_rewritten_neff(path), path=str(path))
        except OutputError:
            raise
        except NrtRewriteError as exc:  # (its location is the file: named once)
            raise SimulationError(f"cannot read the rewritten NEFF: {exc.reason}",
                                  exc.where.merged(file=str(path)),
                                  left_out=exc.left_out) from None
        if model.triggers:
            t = model.triggers[0]
            raise SimulationError(f"the rewritten NEFF still holds a collective trigger "
                                  f"({escape_controls(t.subgraph)} {escape_controls(t.engine)} "
                                  f"instruction {t.index})", file=str(path))
        sgs = {sg.name: sg for sg in model.subgraphs}
        # the input model's subgraphs: the sync bytes each kick word keeps (check_against_model
        # made the manifest's triggers the model's: same subgraph, engine, index and operands)
        in_sgs = {sg.name: sg for sg in self.model.subgraphs} if self.model is not None else None
        self._kick_spad: dict[int, list[tuple[int, str, int]]] = {}
        kick_words: dict[str, set[int]] = {}
        for t in sorted(self.triggers.values(), key=lambda t: t.ordinal):
            sg = sgs.get(t.subgraph)
            stream = sg.streams.get(t.engine) if sg else None
            in_stream = in_sgs[t.subgraph].streams[t.engine] if in_sgs is not None else None
            member = f"{t.subgraph}/{t.engine}.bin"
            if sg is None:  # (the manifest's subgraph, or the NEFF's list, was changed)
                raise SimulationError(f"the rewritten NEFF has no subgraph "
                                      f"{escape_controls(t.subgraph)}, the trigger's: its "
                                      f"TOPSP_KICK word should be instruction {t.index} of "
                                      f"{escape_controls(member)}", file=str(path),
                                      trigger=t.ordinal)
            # a trigger with SBUF operands was a 0xD9+0xDA pair: two words (NEFF-LIKE.md)
            words = 2 if t.src.get("ap") is not None else 1
            for w in range(words):
                idx = t.index + w
                off = idx * 64
                where = dict(file=str(path), member=member, index=idx, trigger=t.ordinal)
                if stream is None or len(stream) < off + 64:
                    raise SimulationError(f"no instruction {idx} in {escape_controls(member)} for "
                                          f"TOPSP_KICK word {w} of trigger {t.ordinal}", **where)
                word = stream[off:off + 64]
                sync = (_kick(in_stream[off:off + 64])["sync"].tobytes()
                        if in_stream is not None else None)
                self._check_kick_word(t, w, words, word, sync, where)
                self._kick_spad.setdefault(t.ordinal, []).append(
                    (int(_kick(word)["spad_index"]), member, idx))
                kick_words.setdefault(member, set()).add(idx)
        self._check_length(model, path)
        if self.model is not None:
            self._check_header(model, str(path))
            self._check_unchanged(model, kick_words, str(path))
        return {sg.name: i for i, sg in enumerate(model.subgraphs)}

    @staticmethod
    def _check_length(rewritten, path) -> None:
        """The rewritten NEFF is its header and its payload, exactly ``header_size +
        data_size`` bytes: zero bytes after the payload, which the reader tolerates in an
        input, are not written (FORMATS §9)."""
        h = rewritten.header
        try:
            size = os.stat(path).st_size
        except OSError as exc:  # not a protocol error: the simulation cannot be done
            raise OutputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
        if size != h.header_size + h.data_size:
            raise SimulationError(f"the file should be its header and payload, "
                                  f"{h.header_size} + data_size {h.data_size} bytes, not {size} "
                                  "(FORMATS §9)", file=str(path),
                                  offset=h.header_size + h.data_size)

    def _check_header(self, rewritten, path: str) -> None:
        """With the input model: every header field but ``data_size`` and ``hash`` is the
        input's (FORMATS §9; the reader decodes a header to its fields one to one: strings
        NUL-padded, reserved bytes zero)."""
        from nrtrewrite.neff.container import HEADER_FIELDS

        for name in HEADER_FIELDS:
            if name in ("data_size", "hash") or not hasattr(self.model.header, name):
                continue
            got, exp = getattr(rewritten.header, name), getattr(self.model.header, name)
            if got != exp:
                show = (lambda v: v.hex()) if isinstance(got, bytes) else repr
                raise SimulationError(f"header field {name} should be {show(exp)}, the input "
                                      f"model's, not {show(got)}: only data_size and hash are "
                                      "recomputed (FORMATS §9)", file=path, field=name,
                                      offset=HEADER_FIELDS[name][0])

    #: TOPSP_KICK fields (FORMATS §9, ``F.KICK_DTYPE``): (field, first byte, bytes), the
    #: reserved ones named ``reserved`` (a differing byte of them is named by its offset)
    _KICK_FIELDS = tuple(("reserved" if n.startswith("reserved") else n,
                          F.KICK_DTYPE.fields[n][1], F.KICK_DTYPE.fields[n][0].itemsize)
                         for n in F.KICK_DTYPE.names)

    @staticmethod
    def _kick_what(t: TriggerSpec, w: int, words: int) -> str:
        """How an error names word ``w`` of trigger ``t``'s ``words``-word kick."""
        return (f"TOPSP_KICK word {w} of trigger {t.ordinal}"
                + (f" (its former {'0xDA' if w else '0xD9'} word)" if words == 2 else ""))

    def _check_kick_word(self, t: TriggerSpec, w: int, words: int, word: bytes,
                         sync: bytes | None, where: dict) -> None:
        """Word ``w`` of trigger ``t``'s kick: every field FORMATS §9 fixes (bundle.kick_word);
        the sync bytes against the input model's word when the model is known (``sync``), the
        spad_index is :meth:`_check_kicks`'s."""
        from nrtrewrite.bundle import kick_word

        got = _kick(word)
        exp = kick_word(got["sync"].tobytes() if sync is None else sync,
                        int(got["spad_index"]), w, t.ordinal)
        if word == exp:
            return
        first = next(j for j in range(64) if word[j] != exp[j])
        name, a, k = next(f for f in self._KICK_FIELDS if f[1] <= first < f[1] + f[2])
        if name == "reserved":  # name the byte
            a, k = first, 1
        got, exp = word[a:a + k], exp[a:a + k]
        fmt = (lambda b: b.hex(" ")) if name == "sync" else (
            lambda b: f"{int.from_bytes(b, 'little'):#x}")
        src = " (the input model's sync bytes 4..11)" if name == "sync" else ""
        span = f"byte {a}" if k == 1 else f"bytes {a}..{a + k - 1}"
        raise SimulationError(f"{self._kick_what(t, w, words)}: {name} ({span}) should be "
                              f"{fmt(exp)}{src}, not {fmt(got)} (FORMATS §9)",
                              **{**where, "field": name, "offset": where["index"] * 64 + first})

    def _check_unchanged(self, rewritten, kick_words: dict[str, set[int]], path: str) -> None:
        """With the input model: every member of the rewritten NEFF but the kick words is the
        input's, byte for byte (FORMATS §9)."""
        old, new = self.model.members, rewritten.members
        if list(old) != list(new):
            miss = sorted(set(old) ^ set(new))
            what = f"({miss[0]})" if miss else "(their order)"
            raise SimulationError(f"the rewritten NEFF's members differ from the input model's "
                                  f"{what}", file=path, field="members")
        # the engines' instruction streams (64-byte words); any other member is not one
        streams = {f"{sg.name}/{e}.bin" for sg in self.model.subgraphs for e in sg.engines}
        for name, data in old.items():
            got = new[name]
            if got == data:
                continue
            kicks = kick_words.get(name, set())
            diff = None
            if len(got) == len(data):
                a = np.frombuffer(data, np.uint8)
                b = np.frombuffer(got, np.uint8)
                bad = np.flatnonzero(a != b)
                bad = bad[~np.isin(bad // 64, list(kicks))] if kicks else bad
                if not bad.size:
                    continue
                diff = int(bad[0])
            if diff is not None:
                instr = f" (instruction {diff // 64})" if name in streams else ""
                why = f"byte {diff}{instr} differs from the input model's"
            else:
                why = f"the member should be {len(data)} bytes, the input model's, not {len(got)}"
            raise SimulationError(f"{why}: only the trigger words are rewritten (FORMATS §9)",
                                  file=path, member=name,
                                  **({"offset": diff} if diff is not None else {}))

    def _check_kicks(self) -> None:
        """Each kick word's spad_index is the trigger's first entry on its leader (FORMATS §9)."""
        # each leader's first entry of each trigger, from one walk over its entries (a walk
        # per trigger made this triggers x entries: review 57j); keyed by the trigger's id,
        # the triggers held by self.triggers meanwhile
        firsts: dict[int, dict[int, int]] = {}
        for t in self.triggers.values():
            prog = self.programs[t.leader]
            if (of_leader := firsts.get(t.leader)) is None:
                of_leader = firsts[t.leader] = {}
                for e in prog.entries:
                    of_leader.setdefault(id(e.trigger), e.index)
            first = of_leader.get(id(t))
            if first is None:  # (none: as the walk it replaces)
                first = next(e.index for e in prog.entries if e.trigger is t)
            kicks = self._kick_spad.get(t.ordinal, ())
            for w, (spad, member, idx) in enumerate(kicks):
                if spad != first:
                    raise SimulationError(
                        f"{self._kick_what(t, w, len(kicks))}: spad_index (bytes 12..13) should be "
                        f"{first}, not {spad}: the leader (rank {t.leader}) starts the "
                        "trigger at that entry (FORMATS §9)", trigger=t.ordinal,
                        field="spad_index", member=member, index=idx, offset=idx * 64 + 12,
                        file=str(self._neff_path))

    # ------------------------------------------------------------------ run
    def run(self) -> SimulationResult:
        """Load, check and execute the whole output folder."""
        res = self.prepare()
        if res.error is None:
            self.execute(res)
        return res

    def prepare(self) -> SimulationResult:
        """Decode and statically check every file (errors land in the result).  Tests may
        change the decoded programs between :meth:`prepare` and :meth:`execute`."""
        # the numbers' element types, built on first use (ml_dtypes' import, 0.6 s of CPU at
        # 0.7): before the clock starts, so load_seconds stays the time of the folder's files
        _ = codes.NUMPY_DTYPE
        self._t0 = time.perf_counter()
        res = SimulationResult(output=self._output_name(), seed=self.seed)
        self.verdict: dict[int, TriggerResult] = {}
        self.legs_total = self.legs_run = self.transfers_run = self.bytes_moved = 0
        self.every_interleaving = False  # the run's completion proven for every interleaving
        self.programs: dict[int, RankProgram] = {}
        self.n_ranks = 0  # the output's ranks, once its manifest is read
        self._t_load = 0.0
        try:
            self.load_manifest()
            res.triggers = [TriggerResult(t.ordinal, t.label(), t.op, t.dtype.name, t.n,
                                          len(t.group), alu_op=t.alu,
                                          algorithm=t.algorithm)
                            for t in sorted(self.triggers.values(), key=lambda t: t.ordinal)]
            self.verdict = {tr.trigger: tr for tr in res.triggers}
            self.load()
            self.check_programs_fit()
            self._check_kicks()
        except SimulationError as exc:
            self._record(res, exc)
        self._t_load = time.perf_counter() - self._t0
        self._finish(res)
        return res

    def _output_name(self) -> str:
        """The result's ``output``: the folder as given, or with ``names_within`` its path
        from inside that folder (:func:`~nrtrewrite.errors.temporary_name`:
        ``<temporary>/ar2.lowered``; simulate MODEL.neff's temporary folder, removed
        afterwards, whose random name would make two runs' tables and documents differ;
        docs/CLI.md "simulate"), as the result's error names its files."""
        name = (None if self.names_within is None
                else temporary_name(self.out, self.names_within))
        return str(self.out) if name is None else name

    def execute(self, res: SimulationResult) -> None:
        """Run the decoded programs to the end (or to the first protocol error)."""
        gc_was = gc.isenabled()
        gc.disable()  # millions of small acyclic objects: the cyclic collector only costs time
        try:
            self._setup()
            self._loop()
            self._final_checks()
        except SimulationError as exc:
            self._record(res, exc)
        finally:
            if gc_was:
                gc.enable()
        self._finish(res)

    def _record(self, res: SimulationResult, exc: SimulationError) -> None:
        if self.names_within is not None:
            exc.named_within(self.names_within)
        elif self.given is not None:
            exc.named_as(self.out, self.given)
        trig = exc.where.trigger
        res.error_line = exc.line()
        res.error = cut_line(res.error_line)  # (its line, capped as every error line is)
        res.error_where, res.error_reason = str(exc.where), exc.reason
        res.error_left_out = exc.left_out
        res.error_trigger = trig
        if trig is not None and trig in self.verdict:
            self.verdict[trig].status = ERROR
            # (the reason whole: the table's cell and --json cut it, each as it shows it)
            self.verdict[trig].detail = exc.reason
            self.verdict[trig].detail_left_out = exc.left_out

    def _finish(self, res: SimulationResult) -> None:
        for tr in res.triggers:
            if tr.status == MATCH and tr.ranks_checked < tr.group_size:
                tr.status = INCOMPLETE
                tr.detail = (f"{tr.ranks_checked} of {tr.group_size} ranks checked before the run "
                             "stopped")
        total = time.perf_counter() - self._t0
        res.stats = {"ranks": self.n_ranks, "legs": self.legs_total,
                     "legs_run": self.legs_run, "transfers": self.transfers_run,
                     "bytes_moved": self.bytes_moved,
                     "deadlock_free_every_interleaving": self.every_interleaving,
                     "load_seconds": round(self._t_load, 3),
                     "run_seconds": round(total - self._t_load, 3)}

    def _setup(self) -> None:
        self.n_threads = 0
        self.ranks: dict[int, _RankState] = {}
        self.chan_tid: dict[tuple[int, int], int] = {}
        #: (rank, trigger, leg name) -> the rank's entry of that trigger (and HIER leg)
        self.entry_of: dict[tuple[int, int, str], int] = {}
        for r, prog in sorted(self.programs.items()):
            self.ranks[r] = _RankState(prog, self._new_tid())
            for ent in prog.entries:
                self.entry_of[(r, ent.trigger.ordinal, ent.leg)] = ent.index
                for c in ent.channels:
                    if (r, c) not in self.chan_tid:
                        self.chan_tid[(r, c)] = self._new_tid()
        self.proxies: list[_Proxy] = []
        # an entry's proxy has drained a channel after the last of its ops' terminators there
        # (a mesh / RDH entry has one op per event, FORMATS §8)
        self.term_left: dict[tuple[int, int, int], int] = {}
        for (r, c), lst in sorted(self.transfers.items()):
            self.proxies.append(_Proxy(r, c, lst, self._new_tid()))
            for tr in lst:
                if tr.terminator:
                    self.ranks[r].drain_need.setdefault(tr.entry, set()).add(c)
                    key = (r, c, tr.entry)
                    self.term_left[key] = self.term_left.get(key, 0) + 1
        # who waits on which semaphore (static): a token only its producer consumes needs no clock
        cons: dict[tuple[int, int], set[int]] = {}
        for r, prog in self.programs.items():
            for ent in prog.entries:
                for c, (first, count) in ent.queues.items():
                    for key in set(prog.waits_of(first, count)):
                        cons.setdefault(key, set()).add(self.chan_tid[(r, c)])
        for p in self.proxies:
            for tr in p.transfers:
                if tr.first and not tr.terminator:
                    cons.setdefault(tr.handshake, set()).add(p.tid)
        self.consumers = {k: tuple(sorted(v)) for k, v in cons.items()}
        # who increases which semaphore (static): a semaphore of several producers has its
        # token hand-out checked to be the same in every interleaving (_take, SIMULATOR §6)
        prod: dict[tuple[int, int], set[int]] = {}
        for r, prog in self.programs.items():
            for ent in prog.entries:
                for c, (first, count) in ent.queues.items():
                    for key in set(prog.waits_of(first, count, wait=False)):
                        prod.setdefault(key, set()).add(self.chan_tid[(r, c)])
        for p in self.proxies:
            for tr in p.transfers:
                if tr.complete and not tr.terminator and tr.notify is not None:
                    prod.setdefault(tr.notify, set()).add(p.tid)
        self.multi = {k for k, v in prod.items() if len(v) > 1 and k in cons}
        #: (rank, semaphore) of several producers -> [the waits of the group before the
        #: current one, the current group's, its (entry, channels) or None]: _take
        self.groups: dict[tuple[int, int], list] = {}
        n = self.n_threads
        self.vc = [np.zeros(n, self._clock_dtype()) for _ in range(n)]
        self.sem_count = {r: np.zeros(256, np.int64) for r in self.programs}
        #: (rank, semaphore) -> the trigger whose leg or net transfer changed it last
        self.sem_trigger: dict[tuple[int, int], int] = {}
        self.tokens: dict[tuple[int, int], deque] = {}
        # actors blocked per semaphore, in the order they blocked (a dict, not a set: a set of
        # objects iterates by address, so the wake-up order, hence the run a seed gives,
        # moved with the process's allocations, e.g. with how the output's path was spelled)
        self.blocked: dict[tuple, dict] = {}
        self.runnable: list = []
        self.mem: dict[tuple[int, int], np.ndarray] = {}
        self.shadows: dict[tuple[int, int], Shadow] = {}
        self.touch: dict[tuple[int, int], set[int]] = {}
        self.trig_bufs: dict[int, set[tuple[int, int]]] = {}
        #: (rank, region) -> triggers not yet done that may touch it (a buffer freed while a
        #: later one will is kept and cleared where it was written, not made again)
        self.later: dict[tuple[int, int], int] = {}
        #: (rank, region) -> byte ranges written since its buffer was made or cleared (kept
        #: for a buffer a later trigger may touch; DIRTY_RANGES of them at most, else one)
        self.dirty: dict[tuple[int, int], list] = {}
        #: (rank, region) -> bytes of a buffer kept between its triggers with none running
        #: (KEEP_BYTES of them at most: the rest freed as before)
        self.idle: dict[tuple[int, int], int] = {}
        self.idle_bytes = 0
        self.refs: dict[int, Reference] = {}
        self.deferred: list[tuple[TriggerSpec, int, np.ndarray, list, list]] = []
        self.trig_done: dict[int, int] = {}
        self.legs_total = sum(p.legs for p in self.programs.values())
        self.footprints = {}
        #: (trigger, region) -> merged (starts, ends) a leg may write (merge_intervals)
        self.allowed: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        for t in self.triggers.values():
            try:
                src, dst = t.footprints(self.layout)
            except SimulationError as exc:  # (an operand of the top manifest's triggers)
                raise exc.at(file=str(self.out / "manifest.json")) from None
            self.footprints[t.ordinal] = (src, dst)
            allowed: dict[int, list] = {}
            allowed.setdefault(dst.region.index, []).extend(dst.intervals())
            for kind in ("scratch", "gw"):
                reg = self.layout.named(kind)
                if reg is not None and reg.size:
                    allowed.setdefault(reg.index, []).append((0, reg.size))
            for reg, ivs in allowed.items():
                self.allowed[(t.ordinal, reg)] = merge_intervals(ivs)
            for key in self._trigger_keys(t):
                self.later[key] = self.later.get(key, 0) + 1
        #: (rank, region) -> per page of its mapped buffer, the accesses still to come
        self.page_left = self._page_counts()
        for p in self.proxies:
            self._evaluate(p)
        for r in sorted(self.ranks):
            self._start_entry(r, 0)

    def _clock_dtype(self) -> type:
        """The narrowest vector clock that holds every value of the run (docs/SIMULATOR.md §3
        "Memory"): a clock's entry ``t`` is the count of thread ``t``'s own steps seen (a join
        takes maxima), so it is at most that thread's steps in all: a queue thread's one a
        leg of its (rank, channel) over every entry, a proxy's one a transfer (terminators
        included), a control thread's one an input fill and one an entry completion per
        entry.  Under 2^15 each clock is int16, half of int32 (the tokens' copies, a fifth of
        a KANGARING run's peak, most of all)."""
        most = 0
        for r, prog in self.programs.items():
            per_channel: dict[int, int] = {}
            for ent in prog.entries:
                for c, (_first, count) in ent.queues.items():
                    per_channel[c] = per_channel.get(c, 0) + count
            most = max(most, 2 * len(prog.entries), *per_channel.values(), 0)
        for p in self.proxies:
            most = max(most, len(p.transfers))
        return np.int16 if most < np.iinfo(np.int16).max else np.int32

    def _new_tid(self) -> int:
        self.n_threads += 1
        return self.n_threads - 1

    # ------------------------------------------------------------------ scheduling
    def _evaluate(self, actor) -> None:
        if actor.finished or actor.slot >= 0:
            return
        if actor.need is None:
            actor.compute_need()
        ok = True
        for (r, s), v in actor.need:
            if self.sem_count[r][s] < v:
                ok = False
                self.blocked.setdefault((r, s), {})[actor] = None
        if isinstance(actor, _Proxy):
            # a receive entry is posted when its rank starts the entry of its op (FORMATS §8.2)
            t = actor.transfers[actor.pos]
            if not t.terminator and t.rx_entry not in self.ranks[t.receiver].started:
                ok = False
                self.blocked.setdefault(("post", t.receiver, t.rx_entry), {})[actor] = None
        if ok:
            actor.slot = len(self.runnable)
            self.runnable.append(actor)

    def _take_runnable(self):
        i = self.rng.randrange(len(self.runnable))
        actor = self.runnable[i]
        last = self.runnable.pop()
        if last is not actor:
            self.runnable[i] = last
            last.slot = i
        actor.slot = -1
        return actor

    def _loop(self) -> None:
        every = max(1, self.legs_total // 200)
        while self.runnable:
            actor = self._take_runnable()
            if any(self.sem_count[r][s] < v for (r, s), v in actor.need):
                # made runnable, then another actor took the tokens it was ready for (only a
                # wiring that is not persistent does that: simulate/wiring.py): wait again
                self._evaluate(actor)
                continue
            if isinstance(actor, _Queue):
                leg = actor.cur  # (taken by compute_need)
                self._run_leg(actor, leg)
                actor.cur = None  # run: its accesses keep only its name
                actor.pos += 1
                actor.need = None
                self.legs_run += 1
                self.guard.check(self.out_name, leg.trigger)
                if self.progress and self.legs_run % every == 0:
                    self.progress(self.legs_run, self.legs_total)
                if actor.finished:
                    self._queue_done(actor)
                else:
                    self._evaluate(actor)
            else:
                tr = actor.transfers[actor.pos]
                self._run_transfer(actor, tr)
                self.guard.check(self.out_name)
                actor.pos += 1
                actor.need = None
                if not actor.finished:
                    self._evaluate(actor)
        if self.progress:
            self.progress(self.legs_run, self.legs_total)
        stuck = [q for st in self.ranks.values() for q in st.queues.values() if not q.finished]
        stuck += [p for p in self.proxies if not p.finished]
        unfinished = [r for r, st in self.ranks.items() if not st.finished]
        if stuck or unfinished:
            self._deadlock(stuck, unfinished)

    def _deadlock(self, stuck: list, unfinished: list[int]) -> None:
        lines = []
        for a in stuck[:8]:
            waits = ", ".join(f"{sem_name(s)} of rank {r} = {int(self.sem_count[r][s])} "
                              f"(needs {v})" for (r, s), v in (a.need or []))
            lines.append(f"{a.describe()} waits {waits or 'nothing'}")
        if len(stuck) > 8:
            lines.append(f"... and {len(stuck) - 8} more")
        trig = None
        if stuck:
            a = stuck[0]
            trig = (a.entry.trigger.ordinal if isinstance(a, _Queue)
                    else a.transfers[a.pos].trigger)
        elif unfinished:
            st = self.ranks[unfinished[0]]
            if 0 <= st.entry < len(st.prog.entries):
                trig = st.prog.entries[st.entry].trigger.ordinal
        if not lines:
            lines.append(f"ranks {unfinished[:8]} cannot complete their entry (waiting for a net "
                         "proxy drain)")
        # tokens nobody blocked waits for: where a misdirected increment would have landed
        waited = {key for a in stuck for key, _v in (a.need or [])}
        stray = [(r, int(sid), int(self.sem_count[r][sid])) for r in sorted(self.sem_count)
                 for sid in np.flatnonzero(self.sem_count[r]) if (r, int(sid)) not in waited]
        if stray:
            shown = ", ".join(f"{sem_name(sid)} of rank {r} = {v} (last changed by trigger "
                              f"{self._last_trigger(r, sid)})" for r, sid, v in stray[:8])
            more = f" and {len(stray) - 8} more" if len(stray) > 8 else ""
            lines.append(f"held but waited for by no blocked leg (a misdirected increment lands "
                         f"on one of these): {shown}{more}")
        raise SimulationError("deadlock: work remains but nothing can run: " + "; ".join(lines),
                              trigger=trig)

    # ------------------------------------------------------------------ semaphores
    def _give(self, r: int, s: int, v: int, clock: np.ndarray | None, tid: int,
              trigger: int, who=None) -> None:
        cnt = self.sem_count[r]
        if cnt[s] + v > SEM_MAX:
            raise SimulationError(f"{sem_name(s)} of rank {r} overflows 32 bits", rank=r)
        cnt[s] += v
        self.sem_trigger[(r, s)] = trigger
        if self.consumers.get((r, s)) == (tid,):
            clock = None  # only the producer itself ever waits on it: nothing to join
        q = self.tokens.get((r, s))
        if q is None:
            q = self.tokens[(r, s)] = deque()
        if (r, s) in self.multi:
            # each increment its own record, with who made it (tid, its step) and where
            q.append([v, clock, tid, int(self.vc[tid][tid]), _kept(who)])
        elif q and q[-1][1] is clock:
            # the same clock (or none) as the newest tokens: one record more of them (a wait
            # joins it once either way; a ring's dma_compl_sema holds one, not one a leg)
            q[-1][0] += v
        else:
            q.append([v, clock])
        waiting = self.blocked.pop((r, s), None)
        if waiting:
            for a in waiting:
                self._evaluate(a)

    def _take(self, r: int, s: int, v: int, vc: np.ndarray, trigger: int, tid: int,
              where: tuple | None, who) -> None:
        """Wait ``v`` on semaphore ``s`` of rank ``r``: take its oldest tokens and join their
        clocks.  ``tid`` is the waiter's thread, ``where`` its (entry, channel) (None for a
        proxy), ``who`` it for a message."""
        if not v:
            return
        self.sem_count[r][s] -= v
        self.sem_trigger[(r, s)] = trigger
        q = self.tokens[(r, s)]
        st = None
        if (r, s) in self.multi:
            st = self._group(r, s, tid, int(vc[tid]) + 1, where, who)
        while v:
            head = q[0]
            if st is not None:
                self._forced(r, s, head, st, who, trigger)
            n = min(v, head[0])
            if head[1] is not None:
                np.maximum(vc, head[1], out=vc)
            head[0] -= n
            v -= n
            if not head[0]:
                q.popleft()

    #: groups of waits remembered per semaphore of several producers (a run of groups that
    #: took from one producer counts once): a memory bound only, ``_forced`` never walking
    #: past the last two segments (docs/SIMULATOR.md §6)
    TOKEN_HISTORY = 64

    def _group(self, r: int, s: int, tid: int, stamp: int, where: tuple | None,
               who) -> list:
        """Record a wait on a semaphore of several producers; return its state
        ``[history, current group]`` (docs/SIMULATOR.md §6).  The waits on one semaphore are
        in order (each entry's by one channel, a proxy's alone: the wiring proof,
        wiring.py), but the channels of one entry that each wait once on one increment (the
        handshake's entry_go), which form one group.  A group is ``[waits, producers,
        (entry, channels) or None]``; the history a list of segments ``[producers, first
        group's waits, last group's waits]``, consecutive groups that took from the same
        one producer merged, the oldest dropped past ``TOKEN_HISTORY``."""
        who = _kept(who)
        st = self.groups.get((r, s))
        if st is None:
            st = self.groups[(r, s)] = [[], None]
        g = st[1]
        if g is not None and g[0][-1][:2] == (tid, stamp):
            return st  # (another record of the same wait)
        if g is not None and where is not None and g[2] is not None and g[2][0] == where[0] \
                and where[1] not in g[2][1]:
            g[0].append((tid, stamp, who))
            g[2][1].add(where[1])
            return st
        if g is not None:  # the group before is complete: into the history
            hist = st[0]
            if hist and len(g[1]) == 1 and hist[-1][0] == g[1]:
                hist[-1][2] = g[0]
            else:
                hist.append([g[1], g[0], g[0]])
                if len(hist) > self.TOKEN_HISTORY:
                    del hist[0]
        st[1] = [[(tid, stamp, who)], set(),
                 (where[0], {where[1]}) if where is not None else None]
        return st

    def _forced(self, r: int, s: int, head: list, st: list, who, trigger: int) -> None:
        """The increment ``head`` (of producer P) is taken by a wait of the current group.
        Every earlier group it is not ordered after could have taken it in another order;
        that changes nothing only if such a group took from P alone (P's increments come in
        P's order, and nothing but P's can reach it).  Then the increments each wait takes,
        and so the clocks it joins, are the same in every interleaving (docs/SIMULATOR.md
        §6).  Else which increment a wait gets depends on the order: refused."""
        _v, clock, ptid, pstamp, pwho = head

        def after(waits) -> bool:
            if clock is not None:
                return all(clock[t] >= stamp for t, stamp, _w in waits)
            # (only the producer's own thread waits on it)
            return all(ptid == t and pstamp >= stamp for t, stamp, _w in waits)

        st[1][1].add(ptid)
        # (the walk ends at the first segment of another producer: segments of P alone are
        # merged when consecutive, so it never passes the last two)
        for prods, first, last in reversed(st[0]):
            if after(last):
                return
            if prods != {ptid}:
                other = last[0][2]
                break
            if after(first):
                return
        else:
            return  # (no earlier group took another producer's)
        why = (f"{_what(who)} takes the one of {_what(pwho)}, which is not ordered after an "
               f"earlier wait that took another producer's, {_what(other)}, so that wait can "
               "take it in another order")
        raise SimulationError(
            f"{sem_name(s)}{_role(s)} of rank {r} is increased by several producers and "
            f"waited on more than once, and which increment a wait takes depends on the "
            f"interleaving: {why} (docs/SIMULATOR.md §6)", rank=r, trigger=trigger)

    # ------------------------------------------------------------------ memory
    #: written ranges remembered per buffer before they are kept as their hull
    DIRTY_RANGES = 64
    #: the most bytes of buffers kept between their triggers (a later trigger touches them)
    #: with no trigger running on them; a buffer past it is freed and made again, as until
    #: 2026-12-06 every buffer was: keeping every one held each var a later trigger reuses
    #: on every rank across the triggers between, over the floor memguard checks (8 ranks,
    #: six 16 MiB all-reduces each on its own vars, then the same six: 2.08 GB for 0.91)
    KEEP_BYTES = 256 << 20

    def _page_counts(self) -> dict[tuple[int, int], np.ndarray]:
        """(rank, region) -> for each page (:data:`PAGE`) of its buffer, how many accesses of
        the whole run touch it: every data leg's byte runs (its sources and destinations),
        every net transfer's, each input fill and output check, for the buffers that are
        mappings of their own (:data:`MAPPED_BYTES`).  An access done takes its pages' count
        down (:meth:`_release`); a page no access left touches is given back to the system
        at once, not when its trigger is done (docs/SIMULATOR.md §3 "Memory"): a byte
        another trigger reads or checks is one it wrote itself, and one it leaves unwritten
        is a zero either way, so no run reads or checks a byte of it but the zeros a
        buffer made anew holds.  Empty (no page given back early) when a program's legs are
        built otherwise than from its decoded runs (:func:`_pristine`)."""
        if not all(_pristine(prog) for prog in self.programs.values()):
            return {}
        nreg = len(self.layout.regions)
        big = np.array([self.layout.region(i).storage >= MAPPED_BYTES for i in range(nreg)]
                       + [False])
        if not big.any():
            return {}
        parts = []  # (keys, first pages, ends) per program, and of the rest together
        for prog in self.programs.values():
            R = prog.runs
            reg = R["reg"].astype(np.int64)
            m = big[np.where((reg >= 0) & (reg < nreg), reg, nreg)] & (R["len"] > 0)
            if m.any():
                off, ln = R["off"][m].astype(np.int64), R["len"][m].astype(np.int64)
                parts.append((R["rank"][m].astype(np.int64) * nreg + reg[m], off // PAGE,
                              -(-(off + ln) // PAGE)))
        rest = []  # (rank, region, offset, bytes) of the fills, checks and net transfers
        for r, prog in self.programs.items():
            entries = prog.entries
            for e, ent in enumerate(entries):
                src, dst = self.footprints[ent.trigger.ordinal]
                if ((e == 0 or not entries[e - 1].trigger_next)  # (_start_entry's fill)
                        and big[src.region.index]):
                    rest += [(r, src.region.index, a, b - a) for a, b in src.intervals()]
                if not ent.trigger_next and big[dst.region.index]:  # (the output check)
                    rest += [(r, dst.region.index, a, b - a) for a, b in dst.intervals()]
        for p in self.proxies:
            for tr in p.transfers:
                if not tr.terminator:
                    rest += [(*tr.src, tr.size), (*tr.dst, tr.size)]
        rest = [x for x in rest if big[x[1]] and x[3] > 0]
        if rest:
            a = np.array(rest, np.int64)
            parts.append((a[:, 0] * nreg + a[:, 1], a[:, 2] // PAGE,
                          -(-(a[:, 2] + a[:, 3]) // PAGE)))
        if not parts:
            return {}
        keys = np.unique(np.concatenate([k for k, _a, _b in parts]))
        pages = np.array([-(-self.layout.region(int(k) % nreg).storage // PAGE)
                          for k in keys], np.int64)
        base = np.cumsum(pages) - pages
        diff = np.zeros(int(pages.sum()) + 1, np.int64)
        for k, a, b in parts:
            at = base[np.searchsorted(keys, k)]
            np.add.at(diff, at + a, 1)
            np.add.at(diff, at + b, -1)
        counts = np.cumsum(diff[:-1]).astype(np.int32)
        return {(int(k) // nreg, int(k) % nreg): counts[b0:b0 + n]
                for k, b0, n in zip(keys.tolist(), base.tolist(), pages.tolist())}

    def _release(self, r: int, reg: int, off: int, n: int) -> None:
        """An access of bytes ``[off, off + n)`` of buffer ``(r, reg)`` done: the pages no
        access of the run touches any more go back to the system (:meth:`_page_counts`)."""
        left = self.page_left.get((r, reg))
        if left is None or n <= 0:
            return
        p0, p1 = off // PAGE, -(-(off + n) // PAGE)
        seg = left[p0:p1]
        seg -= 1
        if seg.all():
            return
        buf = self.mem.get((r, reg))
        if buf is None:
            return
        done = np.flatnonzero(seg == 0)
        brk = np.flatnonzero(np.diff(done) != 1)
        for a, b in zip(done[np.r_[0, brk + 1]].tolist(), done[np.r_[brk, -1]].tolist()):
            _drop_pages(buf, p0 + a, p0 + b + 1)

    def _release_runs(self, streams: list) -> None:
        for runs in streams:
            for r, reg, off, n in runs:
                self._release(r, reg, off, n)

    def _trigger_keys(self, t: TriggerSpec) -> list[tuple[int, int]]:
        """The (rank, region) buffers trigger ``t`` may touch: its operands', scratch and
        gateway on each rank of its group (a leg writes no other rank or region, and reads
        only bytes written in its trigger)."""
        src, dst = self.footprints[t.ordinal]
        regs = {src.region.index, dst.region.index}
        for kind in ("scratch", "gw"):
            reg = self.layout.named(kind)
            if reg is not None:
                regs.add(reg.index)
        return [(r, reg) for r in t.group for reg in sorted(regs)]

    def _dirty(self, key: tuple[int, int], lo: int, hi: int) -> None:
        """Bytes ``[lo, hi)`` of buffer ``key`` written: remembered when the buffer may
        outlive the trigger writing them (another trigger not yet done may touch it)."""
        if hi <= lo or self.later.get(key, 0) <= 0:  # (freed for good after this trigger)
            return
        d = self.dirty.setdefault(key, [])
        if d and d[-1][0] <= hi and lo <= d[-1][1]:
            d[-1] = (min(d[-1][0], lo), max(d[-1][1], hi))
        elif len(d) < self.DIRTY_RANGES:
            d.append((lo, hi))
        else:
            d[:] = [(min(lo, min(a for a, _b in d)), max(hi, max(b for _a, b in d)))]

    def _free(self, key: tuple[int, int]) -> None:
        """Buffer ``key`` freed for good (until a trigger makes it again), kept or not."""
        self.mem.pop(key, None)
        self.dirty.pop(key, None)
        if key in self.idle:
            self.idle_bytes -= self.idle.pop(key)

    def _buffer(self, r: int, reg: int, trigger: int) -> np.ndarray:
        key = (r, reg)
        buf = self.mem.get(key)
        if buf is None:
            buf = self.mem[key] = _zeroed(self.layout.region(reg).storage)
        elif key in self.idle:  # a kept buffer taken up again
            self.idle_bytes -= self.idle.pop(key)
        users = self.touch.setdefault(key, set())
        if trigger not in users:
            users.add(trigger)
            self.trig_bufs.setdefault(trigger, set()).add(key)
        return buf

    def _shadow(self, r: int, reg: int) -> Shadow:
        sh = self.shadows.get((r, reg))
        if sh is None:
            sh = self.shadows[(r, reg)] = Shadow(self.layout.region(reg).storage)
        return sh

    def _conflict(self, c: Conflict, acc: Access, r: int, reg: int, verb: str) -> SimulationError:
        region = self.layout.region(reg)
        where = (f"bytes [{c.lo:#x}, {c.hi:#x}) of rank {r} {region.kind} {json_text(region.name)} "
                 f"(address {self.layout.core_base(r) + self.layout.storage_address(region, c.lo):#x})")
        me = _describe(acc)
        other = _describe(c.other)
        if c.kind == "unwritten":
            why = f"{me} {verb} {where}, which nothing wrote in trigger {acc.trigger}"
        elif c.kind == "stale":
            why = (f"{me} {verb} {where}, which should be last written in trigger "
                   f"{acc.trigger}, not in trigger {c.trigger} (by {other})")
        elif c.kind == "raw":
            why = (f"{me} {verb} {where} written by {other} with no happens-before ordering "
                   "between them (missing or misdirected semaphore)")
        elif c.kind == "ww":
            why = (f"{me} {verb} {where} also written by {other} with no happens-before ordering "
                   "between the two writes")
        else:
            why = (f"{me} {verb} {where} that {other} reads with no happens-before ordering "
                   "(the read may see either value)")
        who = _who(acc)
        return SimulationError(why, rank=who.rank if hasattr(who, "rank") else r,
                               trigger=acc.trigger)

    def _read(self, runs: list, acc: Access, vc: np.ndarray) -> np.ndarray:
        for r, reg, ivs in _merged(runs):
            try:
                self._shadow(r, reg).read_many(ivs, acc, vc)
            except Conflict as c:
                raise self._conflict(c, acc, r, reg, "reads") from None
        parts = [self._buffer(r, reg, acc.trigger)[off:off + n] for r, reg, off, n in runs]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _write(self, runs: list, data: np.ndarray, acc: Access, vc: np.ndarray) -> None:
        pos = 0
        t = self.triggers[acc.trigger]
        for r, reg, off, n in runs:
            if r not in self.group_set[t.ordinal]:
                raise SimulationError(f"{_describe(acc)} writes rank {r}, which is not in "
                                      f"trigger {t.ordinal}'s replica group", trigger=t.ordinal)
            ivs = self.allowed.get((t.ordinal, reg))
            if not ivs or not covers(ivs[0], ivs[1], off, off + n):
                region = self.layout.region(reg)
                raise SimulationError(
                    f"{_describe(acc)} writes bytes [{off:#x}, {off + n:#x}) of rank {r} "
                    f"{region.kind} {json_text(region.name)}, outside trigger {t.ordinal}'s "
                    "output, scratch and gateway buffers", trigger=t.ordinal)
        for r, reg, ivs in _merged(runs):
            try:
                self._shadow(r, reg).write_many(ivs, acc, vc)
            except Conflict as c:
                raise self._conflict(c, acc, r, reg, "writes") from None
        for r, reg, off, n in runs:
            self._buffer(r, reg, acc.trigger)[off:off + n] = data[pos:pos + n]
            self._dirty((r, reg), off, off + n)
            pos += n
        self.bytes_moved += pos

    # ------------------------------------------------------------------ legs
    def _run_leg(self, q: _Queue, leg: Leg) -> None:
        vc = self.vc[q.tid]
        for r, s, v in leg.waits:
            self._take(r, s, v, vc, leg.trigger, q.tid, (q.entry.index, q.channel), leg)
        vc[q.tid] += 1
        if leg.srcs:
            self._check_peers_started(q, leg, vc)
            acc = Access(q.tid, int(vc[q.tid]), leg.trigger, Access.LEG, leg.name())
            if leg.sequential:
                for srcs, dsts in leg.tiles:
                    self._move(srcs, dsts, leg, acc, vc)
            else:
                self._move(leg.srcs, leg.dsts, leg, acc, vc)
            if self.page_left:
                self._release_runs(leg.srcs)
                self._release_runs(leg.dsts)
        if leg.incs:
            snap = None
            for r, s, v in leg.incs:
                if snap is None and self.consumers.get((r, s)) != (q.tid,):
                    snap = vc.copy()
                self._give(r, s, v, snap, q.tid, leg.trigger, leg)

    def _check_peers_started(self, q: _Queue, leg: Leg, vc: np.ndarray) -> None:
        """docs/FORMATS.md §3.4: no leg of an entry touches a peer's memory before that peer
        has started its entry of the same trigger (and HIER leg).  The peer's start (its
        control clock then) must happen-before the leg, whether or not an access of another
        trigger conflicts with this one (docs/SIMULATOR.md §5).  Only legs touch a peer's
        memory directly (a network peer's bytes go through the net proxy, which joins the
        receiver's start when it posts the receive)."""
        peers = {r for streams in (leg.srcs, leg.dsts) for runs in streams
                 for r, _reg, _off, _n in runs if r != leg.rank}
        for r in sorted(peers):
            st = self.ranks.get(r)
            e = self.entry_of.get((r, leg.trigger, q.entry.leg))
            if st is None or e is None:
                raise SimulationError(
                    f"{leg.who()} touches rank {r}'s memory, but rank {r} has no entry of "
                    f"trigger {leg.trigger} ({q.entry.leg})", rank=leg.rank, trigger=leg.trigger)
            start = st.started.get(e)
            if start is None or vc[st.ctrl_tid] < start[st.ctrl_tid]:
                raise SimulationError(
                    f"{leg.who()} touches rank {r}'s memory with no happens-before ordering "
                    f"after rank {r} started its entry {e} of trigger {leg.trigger}: rank {r} "
                    "may still be in an earlier entry (the entry handshake, docs/FORMATS.md "
                    "§3.4)", rank=leg.rank, trigger=leg.trigger)

    def _region_name(self, reg: int) -> str:
        region = self.layout.region(reg)
        return f"{region.kind} {json_text(region.name)}"

    def _move(self, srcs: list, dsts: list, leg: Leg, acc: Access, vc: np.ndarray) -> None:
        datas = [self._read(runs, acc, vc) for runs in srcs]
        if leg.cce is None:
            result = datas[0]
        else:
            op, in_code, out_code = leg.cce
            ufunc = _UFUNC[op]
            in_dt = codes.NUMPY_DTYPE[DType(in_code)]
            # overflow to infinity and NaN are the engine's outcomes (SIMULATOR.md §4), not
            # faults: numpy's RuntimeWarning (with its install's path) stays off stderr
            with np.errstate(over="ignore", invalid="ignore"):
                acc32 = datas[0].view(in_dt).astype(np.float32)
                for d in datas[1:]:
                    d32 = d.view(in_dt).astype(np.float32)
                    ufunc(acc32, d32, out=acc32)
                    if op in _TIE_OPS:  # a +0 / -0 tie is the later source's zero, by rule
                        np.copyto(acc32, d32, where=(d32 == 0) & (acc32 == 0))  # (numpy: open)
                result = acc32.astype(codes.NUMPY_DTYPE[DType(out_code)]).view(np.uint8)
        if leg.sequential and len(dsts) > 1:  # (only such legs' streams may overlap)
            _check_overlapping_streams(leg, dsts, result, self._region_name)
        for runs in dsts:
            self._write(runs, result, acc, vc)

    def _queue_done(self, q: _Queue) -> None:
        st = self.ranks[q.rank]
        q.done_vc = self.vc[q.tid].copy()
        st.pending.discard(q.channel)
        if not st.pending:
            self._complete_entry(q.rank)

    # ------------------------------------------------------------------ net proxy
    def _run_transfer(self, p: _Proxy, tr: Transfer) -> None:
        vc = self.vc[p.tid]
        if tr.first and not tr.terminator:
            self._take(tr.handshake[0], tr.handshake[1], 1, vc, tr.trigger, p.tid, None,
                       (p, tr))
        vc[p.tid] += 1
        if tr.terminator:
            st = self.ranks[p.rank]
            key = (p.rank, p.channel, tr.entry)
            self.term_left[key] -= 1
            if self.term_left[key]:
                return
            st.drained[(tr.entry, p.channel)] = vc.copy()
            if st.entry == tr.entry and ("drain", p.channel) in st.pending:
                st.pending.discard(("drain", p.channel))
                if not st.pending:
                    self._complete_entry(p.rank)
            return
        self.transfers_run += 1
        np.maximum(vc, self.ranks[tr.receiver].started[tr.rx_entry], out=vc)  # the posting
        acc = Access(p.tid, int(vc[p.tid]), tr.trigger, Access.PROXY, tr)
        sr, sreg, soff = tr.src
        data = self._read([(sr, sreg, soff, tr.size)], acc, vc)
        self._write([(tr.dst[0], tr.dst[1], tr.dst[2], tr.size)], data, acc, vc)
        if self.page_left:
            self._release(sr, sreg, soff, tr.size)
            self._release(tr.dst[0], tr.dst[1], tr.dst[2], tr.size)
        if tr.complete:
            self._give(tr.notify[0], tr.notify[1], 1, vc.copy(), p.tid, tr.trigger, (p, tr))

    # ------------------------------------------------------------------ entries
    def _start_entry(self, r: int, e: int) -> None:
        st = self.ranks[r]
        st.entry = e
        entries = st.prog.entries
        if e >= len(entries):
            st.finished = True
            return
        ent = entries[e]
        ctrl = self.vc[st.ctrl_tid]
        if e == 0 or not entries[e - 1].trigger_next:
            self._fill(r, ent.trigger, ctrl, st.ctrl_tid)
        st.started[e] = ctrl.copy()
        for a in self.blocked.pop(("post", r, e), ()):
            self._evaluate(a)
        st.queues = {}
        st.pending = set(ent.channels)
        for c in st.drain_need.get(e, ()):
            if (e, c) not in st.drained:
                st.pending.add(("drain", c))
        for c in ent.channels:
            tid = self.chan_tid[(r, c)]
            np.maximum(self.vc[tid], ctrl, out=self.vc[tid])
            q = _Queue(r, ent, c, tid, st.prog.legs_of(ent, c))
            st.queues[c] = q
            self._evaluate(q)
        if not st.pending:
            self._complete_entry(r)

    def _complete_entry(self, r: int) -> None:
        st = self.ranks[r]
        e = st.entry
        ent = st.prog.entries[e]
        ctrl = self.vc[st.ctrl_tid]
        for q in st.queues.values():
            np.maximum(ctrl, q.done_vc, out=ctrl)
        for c in st.drain_need.get(e, ()):
            np.maximum(ctrl, st.drained.pop((e, c)), out=ctrl)
        ctrl[st.ctrl_tid] += 1
        if not ent.trigger_next:
            self._check_output(r, ent.trigger, ctrl, st.ctrl_tid)
        self._start_entry(r, e + 1)

    # ------------------------------------------------------------------ data in and out
    def _fill(self, r: int, t: TriggerSpec, ctrl: np.ndarray, tid: int) -> None:
        ctrl[tid] += 1
        src, _dst = self.footprints[t.ordinal]
        pos = t.pos(r)
        acc = Access(tid, int(ctrl[tid]), t.ordinal, Access.FILL, f"the input fill of rank {r} "
                     f"for trigger {t.ordinal}")
        reg = src.region.index
        buf = self._buffer(r, reg, t.ordinal)
        sh = self._shadow(r, reg)
        lo = hi = None
        try:
            for a, b in src.intervals():
                sh.write(a, b, acc, ctrl)
                lo = a if lo is None else min(lo, a)
                hi = b if hi is None else max(hi, b)
        except Conflict as c:
            raise self._conflict(c, acc, r, reg, "writes") from None
        if lo is not None:  # (the fill writes inside its footprint's ranges)
            self._dirty((r, reg), lo, hi)
        npdt = codes.NUMPY_DTYPE[t.dtype]
        args = (self.seed, t.ordinal, pos, len(t.group), t.n, t.dtype, t.alu or "", t.reduce)
        if src.offsets is None:  # contiguous: made in place, read back where it lies
            got = buf[src.start:src.start + src.count * src.dsize].view(npdt)
            make_input(*args, out=got)
        else:  # an access pattern may write a byte twice: the effective input is read back
            src.scatter(buf, np.ascontiguousarray(make_input(*args)).view(np.uint8))
            got = src.gather(buf).view(npdt)
        ref = self.refs.get(t.ordinal)
        if ref is None:
            ref = self.refs[t.ordinal] = Reference(t.op, t.alu, t.dtype, t.group, t.n)
        ref.add(pos, got, check=lambda: self.guard.check(self.out_name, t.ordinal))
        if self.page_left:
            for a, b in src.intervals():
                self._release(r, reg, a, b - a)

    def _check_output(self, r: int, t: TriggerSpec, ctrl: np.ndarray, tid: int) -> None:
        _src, dst = self.footprints[t.ordinal]
        reg = dst.region.index
        buf = self._buffer(r, reg, t.ordinal)
        acc = Access(tid, int(ctrl[tid]), t.ordinal, Access.CHECK,
                     f"the output check of rank {r} for trigger {t.ordinal}")
        sh = self._shadow(r, reg)
        unwritten = []
        writers: list = []  # (start, end, last writer) of the output's runs, now
        try:
            for a, b in dst.intervals():
                unwritten += sh.check_output(a, b, acc, ctrl, writers)
        except Conflict as c:
            raise self._conflict(c, acc, r, reg, "reads") from None
        got = dst.gather(buf)
        if self.page_left:
            for a, b in dst.intervals():
                self._release(r, reg, a, b - a)
        ref = self.refs[t.ordinal]
        if ref.complete:
            self._verify(t, r, got, unwritten, writers)
        else:
            self.deferred.append((t, r, got, unwritten, writers))
        self.trig_done[t.ordinal] = self.trig_done.get(t.ordinal, 0) + 1
        if self.trig_done[t.ordinal] == len(t.group):
            self._trigger_done(t)

    def _verify(self, t: TriggerSpec, r: int, got: np.ndarray, unwritten: list,
                writers: list) -> None:
        tr = self.verdict[t.ordinal]
        pos = t.pos(r)
        want = self.refs[t.ordinal].expected_bytes(pos)
        tr.ranks_checked += 1
        if tr.status == NOT_RUN:
            tr.status = MATCH
        nbad = sum(b - a for a, b in unwritten)
        if nbad:
            tr.unwritten_bytes += nbad
            region = self.footprints[t.ordinal][1].region
            tr.fail(MISMATCH, f"rank {r}: {nbad} byte(s) of the output were not written by the "
                              f"collective (first at storage offset {unwritten[0][0]:#x} of "
                              f"{json_text(region.name)})")
        if got.size != want.size or not np.array_equal(got, want):
            ds = t.dsize
            g = got.view(np.uint8).reshape(-1, ds)
            w = want.reshape(-1, ds)
            diff = np.flatnonzero((g != w).any(axis=1))
            tr.mismatched_elements += int(diff.size)
            e = int(diff[0])
            npdt = codes.NUMPY_DTYPE[t.dtype]
            gv = element_value(g[e].copy().view(npdt)[0])
            wv = element_value(w[e].copy().view(npdt)[0])
            by = self._written_by(t, r, e, writers)
            if tr.first_mismatch is None:
                tr.first_mismatch = {"rank": r, "element": e, "expected": wv, "got": gv,
                                     "expected_bytes": w[e].tobytes().hex(),
                                     "got_bytes": g[e].tobytes().hex(), "written_by": by}
            tr.fail(MISMATCH, f"rank {r}: {diff.size} element(s) differ, first element {e}: "
                              f"should be {wv} ({w[e].tobytes().hex()}), not {gv} "
                              f"({g[e].tobytes().hex()})"
                              + (f", last written by {by}" if by else ""))

    def _written_by(self, t: TriggerSpec, r: int, e: int, writers: list) -> str | None:
        """Who last wrote element ``e`` of rank ``r``'s output of ``t`` when it was checked
        (its first byte): a leg with its ``legs.bin`` record, a net proxy transfer with its
        ``net_src.bin`` record, or the input fill; None when nothing wrote it (reported as
        unwritten bytes)."""
        dst = self.footprints[t.ordinal][1]
        off = dst.start + e * dst.dsize if dst.offsets is None else int(dst.offsets[e])
        k = bisect_right([a for a, _b, _w in writers], off) - 1
        if k < 0 or not writers[k][0] <= off < writers[k][1] or writers[k][2] is None:
            return None
        acc = writers[k][2]
        if acc.kind == Access.FILL:
            return "the input fill (no leg of the collective wrote it)"
        text = _describe(acc)
        if acc.kind == Access.LEG:
            who = _who(acc)
            text += f", {rank_dir_name(who.rank)}/legs.bin record {who.record}"
        if acc.trigger != t.ordinal:
            text += f", in trigger {acc.trigger}"
        return text

    def _trigger_done(self, t: TriggerSpec) -> None:
        """Every rank of the group completed the trigger: run deferred checks, free memory."""
        keep = []
        for item in self.deferred:
            if item[0] is t:
                self._verify(*item)
            else:
                keep.append(item)
        self.deferred = keep
        self.refs.pop(t.ordinal, None)
        for key in self._trigger_keys(t):
            self.later[key] -= 1
            if not self.later[key] and key not in self.touch:  # kept for t, which left it be
                self._free(key)
        for key in self.trig_bufs.pop(t.ordinal, ()):
            users = self.touch.get(key)
            if users is not None:
                users.discard(t.ordinal)
                if not users:
                    del self.touch[key]
                    buf = self.mem.get(key)
                    if (buf is not None and self.later.get(key, 0) > 0
                            and self.idle_bytes + buf.nbytes <= self.KEEP_BYTES):
                        # a later trigger touches it: cleared where written (as made anew,
                        # zeros), not freed and made again (until 2026-12-06 each trigger
                        # zeroed the whole buffer anew: a scratch region sized for every
                        # trigger made that quadratic in the triggers, SIMULATOR.md §9)
                        for a, b in self.dirty.pop(key, ()):
                            _clear(buf, a, b)
                        self.idle[key] = buf.nbytes
                        self.idle_bytes += buf.nbytes
                    else:
                        self._free(key)

    def _final_checks(self) -> None:
        for r in sorted(self.sem_count):
            nz = np.flatnonzero(self.sem_count[r])
            if nz.size:
                s = int(nz[0])
                raise SimulationError(f"{sem_name(s)} of rank {r} is left at "
                                      f"{int(self.sem_count[r][s])} at the end of the program "
                                      f"({nz.size} non-zero semaphore(s); FORMATS §7: every "
                                      "semaphore returns to 0)", rank=r,
                                      trigger=self._last_trigger(r, s))
        # the run completed: that proves every interleaving completes when the wiring is
        # persistent (simulate/wiring.py, docs/SIMULATOR.md §6)
        why = unproven_wiring(self.programs, self.transfers)
        if why is not None:
            raise SimulationError("the run completed, but its semaphore wiring is not proven "
                                  "free of deadlock in every interleaving: " + why)
        self.every_interleaving = True
        for item in self.deferred:  # pragma: no cover - completes above
            self._verify(*item)
        for tr in self.verdict.values():
            if tr.status == NOT_RUN:
                tr.fail(ERROR, "no rank completed this trigger")

    def _last_trigger(self, r: int, s: int) -> int | None:
        """The trigger whose leg or net transfer last changed semaphore ``s`` of rank ``r``
        (any semaphore: a channel's, the entry handshake's, a mesh event's); None when none
        did."""
        return self.sem_trigger.get((r, s))


def _role(s: int) -> str:
    """What a semaphore outside the ring channel block is (FORMATS §7)."""
    if s == SEM_ENTRY_GO:
        return " (entry_go)"
    if s in ENTRY_POST_SEMS:
        return " (entry_post)"
    if SEM_PEER_BASE <= s < SEM_PEER_BASE + 32:
        return " (a kangaring peer semaphore)"
    if s >= SEM_EVENT_BASE:
        t = s - SEM_EVENT_BASE
        try:
            return f" (event {t}, {codes.EncMeshEventType(t).name})"
        except ValueError:
            return f" (event {t})"
    return ""


def _kept(who):
    """What a token or a wait keeps of its leg: the name (a leg's runs are freed once run),
    or a net transfer's (proxy, Transfer)."""
    return who.name() if isinstance(who, Leg) else who


def _what(who) -> str:
    """A leg's name or a net transfer, as _take's message names it: a transfer as the other
    lines name one (:meth:`Transfer.who`, with its receiving rank; until 2026-12-07 ``net
    proxy rank R channel C net_src.bin record N (trigger T)``)."""
    if not isinstance(who, tuple):
        return LegName.of(who).who()
    _p, tr = who
    return tr.who()


def element_value(v) -> int | str:
    """An element as a mismatch shows it, in its ``detail`` line and in ``--json``'s
    ``first_mismatch`` (docs/CLI.md "simulate"): an integer as an ``int``; a float as the
    shortest text of its exact value as a double (every element type here is one exactly:
    bf16 bits 0xC021 are ``"-2.515625"``, fp32 1/3 ``"0.3333333432674408"``; ``"nan"``,
    ``"inf"``, ``"-inf"``), a string, where ``str`` of an ml_dtypes or numpy scalar rounds to
    the type's own digits (``"-2.51562"``, fp16 ``"-2.516"``, fp32 ``"0.33333334"``)."""
    if isinstance(v, np.integer):
        return int(v)
    return repr(float(v))


def simulate_output(out: str | Path, *, seed: int = 0, progress=None,
                    model=None, memory_check: bool = True,
                    names_within: str | Path | None = None,
                    given: str | None = None) -> SimulationResult:
    """Simulate the output folder ``out`` (checksums are the caller's business).  With
    ``model`` (the input :class:`~nrtrewrite.neff.model.Model`), the manifest's triggers are
    first checked to be the model's.  ``memory_check`` False runs on whatever the memory
    (:mod:`nrtrewrite.simulate.memguard`).  ``names_within``: a folder (simulate
    MODEL.neff's temporary one) whose paths the result's error and ``output`` name from
    inside it, under :data:`~nrtrewrite.errors.TEMPORARY_FOLDER` (``<temporary>/ar2.lowered``).
    ``given``: ``out`` as the user gave it, the form the result's error names its files in."""
    return Simulator(out, seed=seed, progress=progress, model=model,
                     memory_check=memory_check, names_within=names_within, given=given).run()


__all__ = ["Simulator", "simulate_output", "element_value", "CCE_OPS", "MISMATCH", "MATCH", "ERROR"]
