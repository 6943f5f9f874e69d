"""Addresses: the per-rank memory map, SoC routing bits and EVT_SEM semaphores.

Every number here is documented in docs/FORMATS.md "Addresses".

SoC address (64-bit): LOCAL [46:0], DIE [47], CAYMAN_ID [53:48] (the target
device), CAYMAN_ID_VALID [54] (set when the target is another device of the
node).  A target on the same device uses the plain local address.  Network
peers are never addressed by a BD: their bytes go through the net-proxy FIFOs.

Each logical core owns a window of the device's local space
(``CORE_WINDOW`` bytes at ``logical_core * CORE_WINDOW``); inside it, DRAM
vars, the scratch (RECV) region and the gateway (GW) staging region are laid
out from ``DRAM_BASE``; state-buffer vars live in the SBUF window at
``SBUF_BASE + partition * partition_stride``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from nrtrewrite.codes import SBUF_PARTITIONS, VarType
from nrtrewrite.errors import LimitError

LOCAL_MASK = (1 << 47) - 1
DIE_BIT = 47
CAYMAN_ID_SHIFT = 48
CAYMAN_ID_MASK = 0x3F
CAYMAN_ID_VALID = 1 << 54

#: Per-logical-core window of local DRAM space (ours).
CORE_WINDOW = 1 << 36
DRAM_BASE = 1 << 32
SBUF_BASE = 0x8_0000_0000  # 32 GiB into the core window
#: The 0xBF word addresses SBUF bytes as partition x stride + offset from SBUF_BASE in its
#: 32-bit TENSOR3D start_addr (docs/FORMATS.md §4): all partitions must fit 2**32 bytes.
SBUF_WINDOW_LIMIT = 1 << 32
REGION_ALIGN = 4096

#: EVT_SEM aperture (seed 000 §4.1).
EVT_SEM_BASE = 0x82_8000_0000
EVT_SEM_READ = 0x1000
EVT_SEM_SET = 0x1400
EVT_SEM_INC = 0x1800  # encd_arch_get_sp_sema_i_ofst (seed 000 §4.1: the inc offset)
EVT_SEM_DEC = 0x1C00
EVT_SEM_STRIDE = 4
SEMAPHORES_PER_CORE = 256
#: TOP_SP instance stride inside the aperture: ((sp & 7) << 30) + ((sp > 7) << 47).
TOPSP_STRIDE_SHIFT = 30
#: The aperture of TOP_SPs 0..7 lies inside logical core 8's window (8 << 36 = 0x80_0000_0000):
#: on a device of more than 8 logical cores, core 8's DRAM must end below it, so every core's
#: DRAM layout (the same on each) may hold at most this many bytes (6 GiB; docs/FORMATS.md §10).
DRAM_BELOW_EVT_SEM = EVT_SEM_BASE - (8 << 36) - DRAM_BASE


def align_up(value: int, align: int = REGION_ALIGN) -> int:
    return -(-value // align) * align


def sema_address(sp_idx: int, sem_id: int, window: int) -> int:
    """Local SoC address of semaphore ``sem_id`` of TOP_SP ``sp_idx`` in ``window``."""
    if not 0 <= sem_id < SEMAPHORES_PER_CORE:
        raise LimitError(f"semaphore id {sem_id} outside 0..{SEMAPHORES_PER_CORE - 1}")
    return (EVT_SEM_BASE + ((sp_idx & 7) << TOPSP_STRIDE_SHIFT) + ((1 if sp_idx > 7 else 0) << DIE_BIT)
            + window + EVT_SEM_STRIDE * sem_id)


def decode_sema_address(local: int) -> tuple[int, int, int] | None:
    """(sp_idx, window, sem_id) of a local EVT_SEM address, or None when it is not one.

    The tests' decoder: nothing in ``nrtrewrite`` calls it (the simulator decodes addresses
    in ``simulate/layout.py`` from this module's constants); the tests read ``sem.bin``
    addresses and the FIFO ops' semaphore words back with it."""
    die = (local >> DIE_BIT) & 1
    rest = local & ((1 << DIE_BIT) - 1)
    if rest < EVT_SEM_BASE:
        return None
    off = rest - EVT_SEM_BASE
    sp_lo = off >> TOPSP_STRIDE_SHIFT
    if sp_lo > 7:
        return None
    off &= (1 << TOPSP_STRIDE_SHIFT) - 1
    for window in (EVT_SEM_READ, EVT_SEM_SET, EVT_SEM_INC, EVT_SEM_DEC):
        if window <= off < window + EVT_SEM_STRIDE * SEMAPHORES_PER_CORE:
            rel = off - window
            if rel % EVT_SEM_STRIDE:
                return None
            sp = sp_lo + (8 if die else 0)
            return sp, window, rel // EVT_SEM_STRIDE
    return None


def route(local: int, target_device: int, self_device: int) -> int:
    """Add the routing bits for a target on another device of the node."""
    if target_device == self_device:
        return local
    return local | CAYMAN_ID_VALID | ((target_device & CAYMAN_ID_MASK) << CAYMAN_ID_SHIFT)


# ---------------------------------------------------------------------------
# Semaphore allocation (per rank, identical on every rank: SPMD).

#: Ring channel semaphores (4 per channel, as the runtime's ring channel config).
SEM_RECV = 0  # recv_sema: data-ready count, incremented by the predecessor or the proxy
#               (seed 000 §4.1's REMOTE sem, ``remote_sem``)
SEM_SEND = 1  # send_sema: send credit / net-send handshake, consumed by the proxy
SEM_POST = 2  # post_sema: unused by RING and KANGARING; a SINGLE_CYCLE_RING channel pair
#               meets through it (docs/FORMATS.md §7)
SEM_COMPL = 3  # dma_compl_sema: every leg's local completion; mark_end waits on it
#                (seed 000 §4.1's LOCAL sem, ``local_sem``: source release)
SEMS_PER_CHANNEL = 4
#: Entry handshake (docs/DESIGN.md "Entry handshake"), in the TOP_SP's range: an entry's
#: leader channel posts SEM_ENTRY_POST on every same-node peer it exchanges data with,
#: waits for as many posts, then releases the entry's other channels through
#: SEM_ENTRY_DONE.
SEM_ENTRY_DONE = 8
SEM_ENTRY_POST = 9
#: Semaphores 0..15 are left to the TOP_SP's own use (barriers, reporter, the entry handshake).
SEM_CHANNEL_BASE = 16


def channel_sem(channel: int, role: int) -> int:
    sem = SEM_CHANNEL_BASE + SEMS_PER_CHANNEL * channel + role
    if sem >= SEMAPHORES_PER_CORE:
        raise LimitError(f"out of semaphores: channel {channel} needs semaphore {sem}, "
                         f"a core has {SEMAPHORES_PER_CORE}")
    return sem


# ---------------------------------------------------------------------------
# The memory map.

@dataclass(frozen=True)
class Region:
    """A region of one rank's memory (offsets relative to the core window)."""

    name: str
    kind: str  # "dram" | "sbuf" | "scratch" | "gw"
    offset: int  # from the core window start (DRAM) or in-partition offset (SBUF)
    size: int  # bytes (per partition for SBUF)
    subgraph: str | None = None
    var_id: int | None = None
    partitions: int = 1

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "offset": self.offset, "size": self.size,
                "subgraph": self.subgraph, "var_id": self.var_id, "partitions": self.partitions}


@dataclass
class MemoryMap:
    """The same layout on every rank; a rank adds its core window."""

    regions: Sequence[Region] = field(default_factory=tuple)  # (held as a tuple)
    sbuf_partition_stride: int = 0
    #: (regions, {(subgraph, var_id): region}, {kind: region}): the first region of each key,
    #: as a scan of ``regions`` finds it; rebuilt when ``regions`` is replaced (a tuple: it
    #: cannot change in place) (:meth:`_index`)
    _index_cache: tuple | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # A tuple: a region cannot be replaced in place behind the index's back.
        self.regions = tuple(self.regions)

    def _index(self) -> tuple:
        """The lookups of :meth:`var` and :meth:`named`, built once per ``regions`` (both are
        called per trigger operand: a scan of every var's region made lowering cost triggers
        x regions)."""
        regions = self.regions
        if not isinstance(regions, tuple):  # (a list assigned since: held as a tuple too)
            regions = self.regions = tuple(regions)
        cache = self._index_cache
        if cache is None or cache[0] is not regions:
            by_var: dict[tuple[str | None, int | None], Region] = {}
            by_kind: dict[str, Region] = {}
            for reg in regions:
                by_var.setdefault((reg.subgraph, reg.var_id), reg)
                by_kind.setdefault(reg.kind, reg)
            cache = self._index_cache = (regions, by_var, by_kind)
        return cache

    def var(self, subgraph: str, var_id: int) -> Region:
        """The first region of ``var_id`` of ``subgraph``."""
        try:
            return self._index()[1][(subgraph, var_id)]
        except (KeyError, TypeError):
            raise KeyError((subgraph, var_id)) from None

    def named(self, kind: str) -> Region | None:
        """The first region of ``kind``, or None."""
        try:
            return self._index()[2].get(kind)
        except TypeError:  # an unhashable kind names no region
            return None

    @staticmethod
    def core_base(logical_core: int) -> int:
        return logical_core * CORE_WINDOW

    def to_json(self) -> dict:
        return {"core_window": CORE_WINDOW, "dram_base": DRAM_BASE, "sbuf_base": SBUF_BASE,
                "sbuf_partition_stride": self.sbuf_partition_stride,
                "regions": [r.to_json() for r in self.regions]}


def build_memory_map(model, scratch_bytes: int, gw_bytes: int,
                     cores_per_device: int = 1) -> MemoryMap:
    """Lay out every var of every subgraph, then the scratch and gateway regions.

    ``cores_per_device``: the logical cores of a device; with more than 8, core 8's window
    holds the EVT_SEM aperture, so the DRAM layout must stay below it
    (:data:`DRAM_BELOW_EVT_SEM`)."""
    regions: list[Region] = []
    dram = 0
    sbuf = 0
    for sg in model.subgraphs:
        for var_id in sorted(sg.vars):
            var = sg.vars[var_id]
            if var.type == VarType.STATE_BUFFER:
                regions.append(Region(var.name, "sbuf", sbuf, var.size, sg.name, var_id,
                                      var.partitions or 1))
                sbuf = align_up(sbuf + var.size, 64)
            else:
                regions.append(Region(var.name, "dram", dram, var.size, sg.name, var_id))
                dram = align_up(dram + var.size)
    vars_bytes = dram
    regions.append(Region("scratch", "scratch", dram, scratch_bytes))
    dram = align_up(dram + scratch_bytes)
    regions.append(Region("gw", "gw", dram, gw_bytes))
    dram = align_up(dram + gw_bytes)

    def need(limit: int) -> str:
        """The bytes past ``limit``: the vars alone when they pass it, otherwise the vars
        with the scratch and gateway the triggers' engines need (each region
        REGION_ALIGN-aligned, as laid out above)."""
        if vars_bytes > limit or dram == vars_bytes:
            return f"the model's DRAM vars need {vars_bytes} bytes per core"
        return (f"the model's DRAM vars, scratch and gateway need {dram} bytes per core "
                f"(vars {vars_bytes}, scratch {scratch_bytes}, gateway {gw_bytes})")
    window = SBUF_BASE - DRAM_BASE
    if dram > window:
        raise LimitError(f"{need(window)}, more than the {window} bytes of the core window "
                         "below the SBUF window")
    if cores_per_device > 8 and dram > DRAM_BELOW_EVT_SEM:
        raise LimitError(f"{need(DRAM_BELOW_EVT_SEM)}; "
                         f"on a device of {cores_per_device} logical cores at most "
                         f"{DRAM_BELOW_EVT_SEM} fit, since logical core 8's window holds the "
                         f"EVT_SEM semaphores of TOP_SPs 0..7 from {EVT_SEM_BASE:#x}")
    stride = align_up(max(sbuf, 64), 64)
    if SBUF_PARTITIONS * stride > SBUF_WINDOW_LIMIT:
        raise LimitError(f"the model's state-buffer vars need {sbuf} bytes per partition; "
                         f"{SBUF_PARTITIONS} partitions of them do not fit the "
                         f"{SBUF_WINDOW_LIMIT}-byte SBUF window a 32-bit TENSOR3D start_addr "
                         f"addresses ({SBUF_WINDOW_LIMIT // SBUF_PARTITIONS} bytes per partition)")
    return MemoryMap(regions=regions, sbuf_partition_stride=stride)
