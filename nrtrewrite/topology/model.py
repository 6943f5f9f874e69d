"""The topology model: every rank's place (node, device/MLA, die, s-engine, core) and the
edges between ranks with their locality.

This is the offline stand-in for libnccom's NeuronNode / NeuronEdge graph (seed 000 §2.1):
``NeuronEdge::isIntraMLA`` becomes :attr:`EdgeLocality.SAME_DEVICE`, an edge between
torus neighbours is a :attr:`EdgeLocality.DEVICE_LINK` over one of the 4 chip-to-chip
ports of an MLA (``caymanGetC2CPortsPerMla`` = 4, seed 000 §2.2), a remote MLA that is not a
torus neighbour is reached by routing over the C2C ports of intermediate chips
(:attr:`EdgeLocality.C2C_PORT`), and anything on another node crosses the network
(:attr:`EdgeLocality.NETWORK`).  docs/TOPOLOGY.md documents the model, the presets and the
JSON topology file format.

Rank numbering (all presets and JSON files): ranks are consecutive on a device, devices
consecutive on a node, nodes consecutive::

    rank = node * ranks_per_node + device * ranks_per_device + logical_core

A logical core (LNC) of size ``lnc_size`` covers physical cores (TPBs)
``logical_core * lnc_size .. + lnc_size - 1`` of its device; its s-engine is the one that
owns its first TPB, its die the one that owns that s-engine.  The cross-die peer engine is
``sengine ^ 2`` (``sengine_get_d2d_peer_nums``, seed 000 §2.2).
"""

from __future__ import annotations

import math
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

from nrtrewrite import jsonin
from nrtrewrite.codes import MESH_SUB_TYPE_NAMES, EdgeLocality, EncAlgMeshType
from nrtrewrite.emit.address import CAYMAN_ID_MASK
from nrtrewrite.emit.formats import name_text
from nrtrewrite.emit.tiling import DEFAULT_HW_GENERATION, HW_GENERATIONS
from nrtrewrite.errors import (
    LimitError, ValidationError, did_you_mean, escape_controls, json_text, path_text,
)

T = TypeVar("T")

#: Format tag of a JSON topology file (docs/TOPOLOGY.md).
TOPOLOGY_FORMAT = "nrtrewrite-topology/1"
#: Most ranks a topology may have (ours): a topology is built rank by rank, and a model
#: naming rank 2**31-1 must not make us build two billion of them (docs/RELIABILITY.md).
MAX_TOPOLOGY_RANKS = 1 << 20
#: Most devices per node: the SoC address routes to another device of the node by a
#: 6-bit CAYMAN_ID (docs/FORMATS.md §10, emit/address.CAYMAN_ID_MASK).
MAX_DEVICES_PER_NODE = 64
#: Most logical cores (TOP_SPs) per device: the EVT_SEM aperture addresses 8 per die
#: and 2 dies ((sp & 7) << 30, (sp > 7) << 47: our design, docs/FORMATS.md §10; seed 000
#: §4.1 gives only the aperture's base and its four windows).
MAX_CORES_PER_DEVICE = 16
#: Largest topology file read (ours): checked from its size before reading, so a huge file
#: is refused at once, not read into memory.  ``to_json`` of a topology of
#: MAX_TOPOLOGY_RANKS ranks (whose rank table a loader ignores) is about 121 MB, and loads.
MAX_TOPOLOGY_FILE_BYTES = 256 << 20

#: Ranks whose values :meth:`Topology.cached_for_rank` keeps (the ones used last): the rank
#: being lowered and the few a composer may look up beside it.
RANK_CACHE_RANKS = 8

#: Port numbering of a 2-D torus device: +x (east), -x (west), +y (south), -y (north).
TORUS_PORT_NAMES = ("+x", "-x", "+y", "-y")


@dataclass(frozen=True)
class RankInfo:
    """Where one rank lives."""

    rank: int
    node: int
    device: int  # MLA index within the node
    die: int  # die of the device (0 or 1 on trn2)
    sengine: int  # s-engine within the device (S0..S3 on trn2)
    tpb: int  # first physical core (TPB) of the logical core, within the device
    logical_core: int  # logical core (LNC) index within the device
    routing_id: int  # routing id of the device (set_addr_routing_bits; enc_peer_info.rid)


@dataclass(frozen=True)
class DeviceSpec:
    """What one device (MLA) holds.  trn2: 2 dies x 2 s-engines x 2 TPBs = 8 cores."""

    dies: int = 2
    sengines_per_die: int = 2  # SENGS_PER_DIE (nec.h enum SEngine)
    tpbs_per_sengine: int = 2
    c2c_ports: int = 4  # caymanGetC2CPortsPerMla / marianaGetC2CPortsPerMla (seed 000 §2.2)

    @property
    def sengines(self) -> int:  # SENGS_PER_MLA
        return self.dies * self.sengines_per_die

    @property
    def tpbs(self) -> int:
        return self.sengines * self.tpbs_per_sengine


@dataclass(frozen=True)
class Platform:
    """A node type: its devices, how they are linked, and what the runtime supports on it."""

    name: str
    device: DeviceSpec
    devices_per_node: int
    #: device -> {neighbour device: C2C port}; symmetric.
    links: dict[int, dict[int, int]]
    #: Edge-disjoint Hamiltonian cycles over all devices of a node (undirected, each given
    #: in its forward direction).  Ring channels walk these (docs/TOPOLOGY.md "Rings").
    device_cycles: tuple[tuple[int, ...], ...]
    routing_ids: tuple[int, ...]
    lnc_sizes: tuple[int, ...]
    torus: tuple[int, int] | None = None  # (rows, cols) when the links form a 2-D torus
    #: KangaRing needs 4 s-engines per MLA (nec.h KANGARING_NUM_SENG_PER_DEV).
    kangaring: bool = False
    mesh: bool = True
    mesh_sub_type: EncAlgMeshType = EncAlgMeshType.FULL_MESH
    #: NeuronCore version of its cores (trn1: v2, trn2: v3): the CCE element cap per
    #: descriptor (seed 000 §3.4, emit/tiling.SDMA_MAX_CCE_ELEMENTS).
    hw_generation: int = DEFAULT_HW_GENERATION

    def ranks_per_device(self, lnc_size: int) -> int:
        return self.device.tpbs // lnc_size


def torus_links(rows: int, cols: int, c2c_ports: int = 4) -> dict[int, dict[int, int]]:
    """Links of a rows x cols 2-D torus, device d at (x = d % cols, y = d // cols).

    A device of fewer than 4 ports has only ports ``0 .. c2c_ports - 1``; a link is kept
    only when both its ends have it (a +y port with no -y port at the other end is no link:
    links are symmetric, as :attr:`Platform.links` says and a JSON ``links`` list gives)."""
    links: dict[int, dict[int, int]] = {d: {} for d in range(rows * cols)}
    for d in range(rows * cols):
        x, y = d % cols, d // cols
        neigh = (
            ((x + 1) % cols) + y * cols,
            ((x - 1) % cols) + y * cols,
            x + ((y + 1) % rows) * cols,
            x + ((y - 1) % rows) * cols,
        )
        for port, n in enumerate(neigh):
            if port >= c2c_ports or n == d:
                continue
            links[d].setdefault(n, port)  # a 2-wide dimension reaches one neighbour twice
    return {d: {n: port for n, port in nb.items() if d in links[n]} for d, nb in links.items()}


def link_components(n: int, links: dict[int, dict[int, int]]) -> tuple[int, ...]:
    """For each device 0..n-1 of a node, the lowest device of its component: the devices a
    chain of links joins it to (a routed ``C2C_PORT`` hop crosses intermediate chips over
    links; between two components there is no route, docs/TOPOLOGY.md §1)."""
    comp = [-1] * n
    for start in range(n):
        if comp[start] >= 0:
            continue
        comp[start] = start
        todo = [start]
        while todo:
            for nb in links.get(todo.pop(), {}):
                if 0 <= nb < n and comp[nb] < 0:
                    comp[nb] = start
                    todo.append(nb)
    return tuple(comp)


def first_unlinked(places, comp: tuple[int, ...]) -> tuple[int, int, int] | None:
    """Of ``places``, the (node, device) of a group's ranks in the group's order, the first
    ``(node, a, b)``: ``b`` a device no chain of links joins to ``a``, the node's first
    device of the group (``comp``: :func:`link_components`; a device outside it is joined
    to none); None when there is none.  ``lower`` (``Topology.unlinked_devices``) and
    ``simulate`` (``Layout.unlinked_devices``, on the recorded links) both ask this."""
    first: dict[int, int] = {}  # node -> its first device of the group
    n = len(comp)
    for node, dev in places:
        a = first.setdefault(node, dev)
        if not (0 <= a < n and 0 <= dev < n and comp[a] == comp[dev]):
            return node, a, dev
    return None


# Two edge-disjoint Hamiltonian cycles of the 4x4 torus: together they use each of its 32
# links once, so the four directed cycles (each forward and reversed) use every directed
# link exactly once.  Found by tests/test_topology.py's search and checked there.
_TORUS44_CYCLES = (
    (0, 1, 2, 3, 7, 4, 5, 6, 10, 11, 8, 9, 13, 14, 15, 12),
    (0, 3, 15, 11, 7, 6, 2, 14, 10, 9, 5, 1, 13, 12, 8, 4),
)


def preset_platform(name: str) -> Platform:
    """The platform of preset ``name`` (one of :data:`PRESETS`); ``simulate`` holds an
    output lowered on a preset to it (docs/SIMULATOR.md §1)."""
    if name == "trn2":
        dev = DeviceSpec(dies=2, sengines_per_die=2, tpbs_per_sengine=2, c2c_ports=4)
        return Platform(
            name="trn2", device=dev, devices_per_node=16, links=torus_links(4, 4),
            device_cycles=_TORUS44_CYCLES, routing_ids=tuple(range(16)), lnc_sizes=(1, 2),
            torus=(4, 4), kangaring=True, mesh=True, mesh_sub_type=EncAlgMeshType.MESH_TRN2,
            hw_generation=3,  # Trainium2: NeuronCore-v3
        )
    if name == "trn1":
        # 16 Trainium1 devices of 2 NeuronCores in a 4x4 2-D torus; one die, one s-engine
        # per core; no LNC > 1 and no KangaRing.
        dev = DeviceSpec(dies=1, sengines_per_die=2, tpbs_per_sengine=1, c2c_ports=4)
        return Platform(
            name="trn1", device=dev, devices_per_node=16, links=torus_links(4, 4),
            device_cycles=_TORUS44_CYCLES, routing_ids=tuple(range(16)), lnc_sizes=(1,),
            torus=(4, 4), kangaring=False, mesh=True,
            mesh_sub_type=EncAlgMeshType.GROUPED_MESH,
            hw_generation=2,  # Trainium (trn1): NeuronCore-v2
        )
    raise ValidationError(f"unknown topology preset {name!r}"
                          f"{did_you_mean(name, PRESETS, 'presets: trn1, trn2')}",
                          field="topology")


PRESETS = ("trn1", "trn2")


def is_preset(platform: Platform) -> bool:
    """Whether ``platform`` is exactly a preset's, every field as :func:`preset_platform`
    gives it (a topology file on a preset that changes any field is not: its output
    manifest records the whole platform, :func:`platform_json`)."""
    return platform.name in PRESETS and platform == preset_platform(platform.name)


def platform_json(p: Platform) -> dict[str, Any]:
    """The platform fields of a topology object (docs/TOPOLOGY.md §2), as
    :meth:`Topology.to_json` writes them: :data:`PLATFORM_FIELD_KEYS` in order, ``torus`` only
    for a torus.  Given beside ``platform`` they load back to ``p`` (whatever it names),
    so an output records a platform that is not exactly a preset with them (the output
    manifest's ``topology``, ``explain --json``'s: docs/FORMATS.md §1.1)."""
    out: dict[str, Any] = {
        "lnc_sizes": list(p.lnc_sizes),
        "devices_per_node": p.devices_per_node,
        "device": {key: getattr(p.device, key) for key in DEVICE_KEYS},
        "links": sorted([a, port, b] for a, nb in p.links.items() for b, port in nb.items()),
        "device_cycles": [list(c) for c in p.device_cycles],
        "routing_ids": list(p.routing_ids),
        "kangaring": p.kangaring,
        "mesh": p.mesh,
        "mesh_sub_type": p.mesh_sub_type.name,
        "hw_generation": p.hw_generation,
    }
    if p.torus is not None:
        out["torus"] = list(p.torus)
    return out


def with_platform(obj: dict[str, Any], p: Platform) -> dict[str, Any]:
    """An output's topology object ``obj`` (``platform`` naming ``p``) with ``p``'s platform
    fields added that it lacks (:func:`platform_json`), unless ``p`` is exactly a preset (the
    object is then returned as it is: its ``platform`` alone loads the preset back).  So the
    object, given as ``--topology``, loads ``p`` back (docs/TOPOLOGY.md §2), also a changed
    preset or a custom platform."""
    if is_preset(p):
        return obj
    return {**obj, **{key: val for key, val in platform_json(p).items() if key not in obj}}


def preset_of_spec(spec: str | None) -> str | None:
    """The preset a ``--topology`` value names, as :func:`load_topology` reads it: ``None``
    (the default) trn2, ``trn1`` / ``trn2`` with or without options; None for a topology
    file (any other value)."""
    if spec is None:
        return "trn2"
    name = spec.partition(":")[0]
    return name if name in PRESETS else None


def topology_title(name: str, file: str | None = None) -> str:
    """How a line names a topology: a preset by its name, ``topology trn2:nodes=2``; a
    topology file by its path (``file``, as ``options.topology`` records it) and then its
    name, ``topology file t.json, named trn2``, so that a file named like a preset
    (``trn2.json`` without ``name``, a ``name`` such as ``"trn2:nodes=2"``) is not read as
    the preset (docs/CLI.md ``explain``; until 2026-12-06 the refusals of a rank, of an
    engine needing pods or a NeuronSwitch fabric, of a file's ``nodes`` and ``lnc_size``
    said ``topology trn2`` for ``sub/trn2.json``)."""
    if file is None:
        return f"topology {escape_controls(name)}"
    return f"topology file {escape_controls(file)}, named {escape_controls(name)}"


class Topology:
    """Ranks of ``nodes`` identical nodes of one platform, at one LNC size."""

    def __init__(self, platform: Platform, *, lnc_size: int, nodes: int,
                 name: str | None = None, preset_spec: str | None = None,
                 file: str | None = None):
        if lnc_size not in platform.lnc_sizes:
            raise ValidationError(
                f"{platform.name} supports lnc_size {'/'.join(map(str, platform.lnc_sizes))}, "
                f"not {lnc_size}", field="lnc_size")
        if platform.device.tpbs % lnc_size:
            raise ValidationError(f"lnc_size {lnc_size} does not divide the {platform.device.tpbs} "
                                  "cores of a device", field="lnc_size")
        if nodes < 1:
            raise ValidationError(f"nodes must be >= 1, not {nodes}", field="nodes")
        check_topology_size(platform, lnc_size, nodes)
        self.platform = platform
        self.lnc_size = lnc_size
        self.nodes = nodes
        self.name = name or (platform.name if nodes == 1 else f"{platform.name}:nodes={nodes}")
        #: the topology file it was loaded from, its path as ``options.topology`` records it
        #: (None: a preset, or built in code)
        self.file = file
        #: the preset spec it was made from (``trn2:nodes=2``, ``default (trn2)``; None: a
        #: file's, or built in code), for :attr:`source`
        self.preset_spec = preset_spec
        self.ranks_per_device = platform.ranks_per_device(lnc_size)
        self.devices_per_node = platform.devices_per_node
        self.ranks_per_node = self.ranks_per_device * self.devices_per_node
        self.ranks: dict[int, RankInfo] = {}
        dev = platform.device
        for node in range(nodes):
            for d in range(self.devices_per_node):
                for lc in range(self.ranks_per_device):
                    tpb = lc * lnc_size
                    seng = tpb // dev.tpbs_per_sengine
                    rank = node * self.ranks_per_node + d * self.ranks_per_device + lc
                    self.ranks[rank] = RankInfo(
                        rank=rank, node=node, device=d, die=seng // dev.sengines_per_die,
                        sengine=seng, tpb=tpb, logical_core=lc,
                        routing_id=platform.routing_ids[d])
        self._cache: dict[Any, Any] = {}
        #: :meth:`cached_for_rank`'s entries, by rank, the most recently used rank last
        self._rank_cache: dict[int, dict[Any, Any]] = {}
        self._locality: dict[tuple[int, int], EdgeLocality] = {}

    def cached(self, key, make: Callable[[], T]) -> T:
        """``make()``, computed once per ``key`` for the life of this topology.

        For pure functions of the topology and the key (rings, group shapes, kangaring paths);
        the value is shared by every caller, so it must be immutable or never mutated.  A
        ``make`` that raises caches nothing (the next call raises again)."""
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = make()
            return value

    def cached_for_rank(self, rank: int, key, make: Callable[[], T]) -> T:
        """:meth:`cached` for a value of one rank (its composed rows, its peers): kept for the
        :data:`RANK_CACHE_RANKS` ranks used last only.  A lowering works rank after rank, every
        trigger of a rank in turn, so a rank's values are reused while it is lowered and never
        after; kept for the life of the topology, every rank's would add up to the square of
        the ranks (a HIER leg of 512 local ranks: 438 MB for 0.5 MB of a rank's output)."""
        entries = self._rank_cache.pop(rank, None)
        if entries is None:
            entries = {}
            while len(self._rank_cache) >= RANK_CACHE_RANKS:
                del self._rank_cache[next(iter(self._rank_cache))]  # the least recent rank
        self._rank_cache[rank] = entries  # (now the most recent)
        try:
            return entries[key]
        except KeyError:
            value = entries[key] = make()
            return value

    # -- lookups --------------------------------------------------------------------------

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def title(self) -> str:
        """How a line names this topology (:func:`topology_title`): ``topology trn2:nodes=2``,
        or ``topology file t.json, named trn2``."""
        return topology_title(self.name, self.file)

    @property
    def platform_title(self) -> str:
        """How a reason names this topology's platform: a preset's by its name, ``trn2``; a
        topology file's as such, ``the topology file's platform trn2``, so that a file's
        platform changed from a preset's (``"platform": "trn2", "mesh": false``) is not read
        as the preset (until 2026-12-06 ``trn2 has no mesh``, untrue of the preset); a file
        whose platform is exactly a preset's (:func:`is_preset`: a preset output's own
        ``topology`` object given back) by its name, as the preset (review 48l).  Not by
        the file's path, as :attr:`title` does: a reason may be recorded in the manifest
        (a policy choice's), which the path must not change (the same topology object given
        back from another file lowers the same bytes)."""
        name = escape_controls(self.platform.name)
        if self.file is None or is_preset(self.platform):  # (a preset's, from a file: as is)
            return name
        return f"the topology file's platform {name}"

    def rank_refusal(self, rank: int) -> str:
        """Why ``rank`` is refused: it is not in this topology."""
        return f"rank {rank} is not in {self.title} (ranks 0..{self.world_size - 1})"

    def info(self, rank: int) -> RankInfo:
        try:
            return self.ranks[rank]
        except KeyError:
            raise ValidationError(self.rank_refusal(rank), rank=rank) from None

    def rank_at(self, node: int, device: int, logical_core: int) -> int:
        return node * self.ranks_per_node + device * self.ranks_per_device + logical_core

    def same_node(self, a: int, b: int) -> bool:
        return self.info(a).node == self.info(b).node

    def linked(self, dev_a: int, dev_b: int) -> bool:
        """Are two devices of a node neighbours over a device-to-device link?"""
        return dev_b in self.platform.links.get(dev_a, {})

    def link_port(self, dev_a: int, dev_b: int) -> int | None:
        """The C2C port of ``dev_a`` that reaches neighbour ``dev_b``, or None."""
        return self.platform.links.get(dev_a, {}).get(dev_b)

    def device_locality(self, dev_a: int, dev_b: int) -> EdgeLocality:
        if dev_a == dev_b:
            return EdgeLocality.SAME_DEVICE
        if self.linked(dev_a, dev_b):
            return EdgeLocality.DEVICE_LINK
        return EdgeLocality.C2C_PORT

    def unlinked_devices(self, group: tuple[int, ...]) -> tuple[int, int, int] | None:
        """``(node, a, b)``: two devices of one node that ranks of ``group`` sit on and that no
        chain of device links joins (a ``C2C_PORT`` hop between them has no route: a device
        of too few C2C ports, links leaving a device out), the first such pair in the group's
        order;
        None when each node's devices of the group are joined (always on the presets).
        Memoised per group."""
        comp = self.cached("link_components", lambda: link_components(
            self.devices_per_node, self.platform.links))
        if len(set(comp)) < 2:
            return None

        return self.cached(("unlinked_devices", group), lambda: first_unlinked(
            ((info.node, info.device) for info in map(self.info, group)), comp))

    @property
    def source(self) -> str:
        """Where it came from: the topology file's path (:attr:`file`), else the preset
        spec given (``trn2:nodes=2``, ``default (trn2)``), else its platform's name."""
        if self.file is not None:
            return self.file
        return self.preset_spec or self.platform.name

    def unlinked_refusal(self, node: int, a: int, b: int) -> str:
        """Why a collective needing a hop between devices ``a`` and ``b`` of ``node`` is
        refused (:meth:`unlinked_devices`), naming the topology as every line names it
        (:attr:`title`: ``topology file t.json, named t``; until 2026-12-06 without its name)
        and the field whose links leave them apart: ``device.c2c_ports`` when the links are a
        torus laid on fewer ports than it uses, else ``links``."""
        p = self.platform
        ports = p.device.c2c_ports
        where = self.title
        if p.torus is not None and ports < 4 and p.links == torus_links(*p.torus, ports):
            rows, cols = p.torus
            why = (f"field device.c2c_ports: the {rows}x{cols} torus on {ports} C2C "
                   f"port{'' if ports == 1 else 's'} a device has no such chain; a link needs "
                   "its port at both ends, port 0 +x, 1 -x, 2 +y, 3 -y: docs/TOPOLOGY.md §1")
        else:
            why = "field links: no chain of its links joins them"
        return (f"the replica group needs a hop between devices {a} and {b} of node {node}, "
                f"which no chain of device links joins: the hop has no route ({where}, {why})")

    def locality(self, a: int, b: int) -> EdgeLocality:
        """The cheapest edge class between two ranks (memoised per pair: planning asks it
        of every member of every trigger's group)."""
        try:
            return self._locality[a, b]
        except KeyError:
            pass
        ia, ib = self.info(a), self.info(b)  # an unknown rank raises, and is not memoised
        if ia.node != ib.node:
            loc = EdgeLocality.NETWORK
        else:
            loc = self.device_locality(ia.device, ib.device)
        self._locality[a, b] = loc
        return loc

    def spans_nodes(self, group: tuple[int, ...]) -> bool:
        """Does ``group`` have members on more than one node?  (memoised per group)"""
        return self.cached(("spans_nodes", group),
                           lambda: len({self.info(r).node for r in group}) > 1)

    def cross_die_peer(self, rank: int) -> int | None:
        """The rank on the cross-die peer s-engine (``seng ^ 2``) with the same TPB slot.

        None when the device has no second die (trn1) or the peer engine does not exist.
        """
        dev = self.platform.device
        info = self.info(rank)
        if dev.dies < 2 or dev.sengines != 4:
            return None
        peer_seng = info.sengine ^ 2
        tpb = peer_seng * dev.tpbs_per_sengine + info.tpb % dev.tpbs_per_sengine
        return self.rank_at(info.node, info.device, tpb // self.lnc_size)

    @property
    def device_cycles(self) -> tuple[tuple[int, ...], ...]:
        return self.platform.device_cycles

    # -- presentation ---------------------------------------------------------------------

    def to_json(self) -> dict:
        """The topology as a JSON-able dict: the file format of docs/TOPOLOGY.md plus the
        resolved rank table (``ranks``), which a loader ignores.

        Every field of the platform is written, so the dict loads back to the same topology
        (``to_json`` of the loaded one is this dict, the platform equal, its name too).
        ``platform`` names the platform: a preset, or a custom platform, which a loader takes
        beside every platform field as the name it has anyway, the topology's ``name`` or
        ``custom`` (:func:`_named_custom`).  Until 2026-12-06 a custom platform was written
        without it, and a loader named it after ``name``: a file without ``name`` (its
        platform ``custom``, the topology named after the file's stem) loaded back on a
        platform named after the stem.  A platform named otherwise (built in code, never
        loaded from a file) still leaves it out: it loads back named after ``name``."""
        p = self.platform
        fields = platform_json(p)
        torus = fields.pop("torus", None)
        out: dict[str, Any] = {
            "format": TOPOLOGY_FORMAT,
            "name": self.name,
            "platform": p.name,
            "nodes": self.nodes,
            "lnc_size": self.lnc_size,
            **fields,
            "ranks_per_device": self.ranks_per_device,
            "ranks_per_node": self.ranks_per_node,
            "ranks": [
                {"rank": r.rank, "node": r.node, "device": r.device, "die": r.die,
                 "sengine": r.sengine, "tpb": r.tpb, "logical_core": r.logical_core,
                 "routing_id": r.routing_id}
                for r in self.ranks.values()
            ],
        }
        if p.name not in PRESETS and p.name not in (self.name, "custom"):
            del out["platform"]
        if torus is not None:
            out["torus"] = torus
        return out

    def __repr__(self) -> str:
        return (f"Topology({self.name!r}, lnc_size={self.lnc_size}, nodes={self.nodes}, "
                f"ranks={self.world_size})")


# -- device Hamiltonian cycles (for JSON topologies without explicit cycles) --------------

def hamiltonian_cycles(start: int, n: int, neighbours, budget: int):
    """Yield Hamiltonian cycles of ``n`` nodes starting at ``start``, by iterative DFS with
    backtracking; ``neighbours(node)`` gives the nodes to try, in order (it also decides
    whether the last node closes the cycle).  Stops after ``budget`` expansions."""
    path, seen = [start], {start}
    stack = [iter(neighbours(start))]
    steps = 0
    while stack:
        steps += 1
        if steps > budget:
            return
        nxt = next(stack[-1], None)
        if nxt is None:
            stack.pop()
            seen.discard(path.pop())
            continue
        if nxt in seen:
            continue
        if len(path) + 1 == n:
            if start in neighbours(nxt):
                yield (*path, nxt)
            continue
        path.append(nxt)
        seen.add(nxt)
        stack.append(iter(neighbours(nxt)))


def _find_device_cycles(n: int, links: dict[int, dict[int, int]], *, budget: int = 50_000,
                        tries: int = 64) -> tuple[tuple[int, ...], ...]:
    """Up to two edge-disjoint Hamiltonian cycles over devices 0..n-1, by bounded DFS.

    Deterministic (neighbours in ascending order).  Returns () when none is found within
    the budget; rings then fall back to device index order (docs/TOPOLOGY.md).
    """
    if n == 1:
        return ((0,),)
    if n == 2:
        return ((0, 1),) if 1 in links.get(0, {}) else ()
    adj = {d: sorted(links.get(d, {})) for d in range(n)}
    first: tuple[int, ...] | None = None
    for k, cyc in enumerate(hamiltonian_cycles(0, n, adj.__getitem__, budget)):
        if first is None:
            first = cyc
        used = {frozenset((cyc[i], cyc[(i + 1) % n])) for i in range(n)}
        rest = {d: [x for x in adj[d] if frozenset((d, x)) not in used] for d in range(n)}
        second = next(hamiltonian_cycles(0, n, rest.__getitem__, budget), None)
        if second is not None:
            return (cyc, second)
        if k + 1 >= tries:
            break
    return (first,) if first is not None else ()


# -- loading --------------------------------------------------------------------------------

def nodes_for(world: tuple[int, ...], ranks_per_node: int) -> int:
    if not world:
        return 1
    return max(1, math.ceil((max(world) + 1) / ranks_per_node))


def check_topology_size(platform: Platform, lnc_size: int, nodes: int,
                        world: tuple[int, ...] = (), *, file: str | None = None,
                        field: str = "topology", title: str | None = None) -> None:
    """LimitError when ``nodes`` nodes of ``platform`` exceed :data:`MAX_TOPOLOGY_RANKS`.

    Checked before any rank is built; with ``world`` the message names its largest rank
    (the default topology is sized to it).  ``file`` and ``field`` say where the node count
    comes from: the ``--topology`` option (a preset), or a topology file's ``nodes``;
    ``title`` how the line names the topology (:func:`topology_title`; by default
    ``topology`` and the platform's name, a preset's)."""
    rpn = platform.ranks_per_device(lnc_size) * platform.devices_per_node
    if nodes * rpn > MAX_TOPOLOGY_RANKS:
        why = (f" to hold rank {max(world)}" if world and max(world) >= MAX_TOPOLOGY_RANKS
               else "")
        raise LimitError(f"{title or 'topology ' + platform.name} needs {nodes} node(s) x "
                         f"{rpn} ranks = "
                         f"{nodes * rpn} ranks{why}, more than {MAX_TOPOLOGY_RANKS} "
                         "(MAX_TOPOLOGY_RANKS)", file=file, field=field)


def _check_world(topo: Topology, world: tuple[int, ...], *, file: str | None = None,
                 field: str = "topology") -> None:
    """Every rank of the model's world in ``topo``; else the error names the topology file
    and its field (``nodes`` when the file sets it) when it comes from one."""
    bad = [r for r in world if r < 0 or r >= topo.world_size]
    if bad:
        raise ValidationError(
            f"rank {bad[0]} does not fit {topo.title} with lnc_size "
            f"{topo.lnc_size} "
            f"({topo.nodes} node(s) x {topo.ranks_per_node} ranks = "
            f"ranks 0..{topo.world_size - 1})",
            file=file, field=field, rank=bad[0])


def _is_int(val) -> bool:
    """An integer, JSON ``true`` / ``false`` excluded (Python's bools are ints)."""
    return isinstance(val, int) and not isinstance(val, bool)


def _int(obj: dict, key: str, default: int | None = None, *, where: str,
         parent: str = "") -> int:
    """``obj[key]`` (``default`` when absent), an integer; ``parent`` is ``obj``'s key path
    (``device``), so the error names the whole path (``device.dies``).  A key given null is
    as if left out (:func:`given`)."""
    val = obj.get(key)
    if val is None:
        val = default
    if not _is_int(val):
        path = jsonin.joined_key(parent, key)
        raise ValidationError(f"{path} must be an integer, not {json_text(val)}", file=where,
                              field=path)
    return val


def _bool(doc: dict, key: str, default: bool, *, where: str) -> bool:
    """A JSON ``true`` / ``false`` (a string such as ``"false"`` is refused: it would read as
    true)."""
    val = doc.get(key, default)
    if not isinstance(val, bool):
        raise ValidationError(f"{key} must be true or false, not {json_text(val)}", file=where,
                              field=key)
    return val


def _ints(val) -> bool:
    """Whether ``val`` is a list of integers (JSON ``true`` / ``false`` are not integers;
    ``type(v) is int`` first: a JSON integer, at once)."""
    return isinstance(val, list) and all(type(v) is int or _is_int(v) for v in val)


def _link_ends(item: Any, ints: bool, where: str) -> tuple[int, int | None, int, int | None]:
    """``(a, port_a, b, port_b)`` of a ``links`` entry (``ints``: a list of integers), ports
    None where it names none; a :class:`ValidationError` naming ``links`` for an entry of
    another form.  Called once for each entry not given before (a repeat is skipped)."""
    if not ints or len(item) not in (2, 3, 4):
        raise ValidationError("a link is [a, b], [a, port_a, b] or "
                              f"[a, port_a, b, port_b], not {json_text(item)}", file=where,
                              field="links")
    if len(item) == 2:
        return item[0], None, item[1], None
    if len(item) == 3:
        return item[0], item[1], item[2], None
    return item[0], item[1], item[2], item[3]


def _check_devices(n: int, where: str) -> None:
    if n > MAX_DEVICES_PER_NODE:
        raise LimitError(f"{n} devices per node, more than the {MAX_DEVICES_PER_NODE} a 6-bit "
                         "CAYMAN_ID routes to (MAX_DEVICES_PER_NODE)", file=where,
                         field="devices_per_node")


def _check_text(doc: dict, where: str) -> None:
    """Every string of the document (values and keys, also of keys the loader ignores) must
    be Unicode text, and ``name`` a string: ``explain`` prints it and the output manifest
    records it (a lone surrogate, from a JSON ``\\ud800`` escape, was an internal error of
    ``explain`` and went into ``lower``'s manifest)."""
    bad = jsonin.lone_surrogate(doc)
    if bad is not None:
        path, text, at, is_key = bad
        what = "a key" if is_key else path
        raise ValidationError(f"{what} is not Unicode text: lone surrogate U+{ord(text[at]):04X} "
                              f"(a JSON \\u escape) at character {at}", file=where,
                              field=path or None)
    if "name" in doc and not (isinstance(doc["name"], str) and doc["name"].strip()):
        raise ValidationError("name must be a string that is not blank, not "
                              f"{json_text(doc['name'])}",
                              file=where, field="name")


def given(doc: dict) -> dict:
    """The keys of a topology document that are given: a key whose value is null is as if it
    were left out (docs/TOPOLOGY.md §2, as in an assemble spec; until 2026-12-06 only
    ``platform``, ``nodes`` and ``torus`` read null so, ``links`` and ``device_cycles`` null
    were an internal error and the others were refused, ``not None``)."""
    return {key: val for key, val in doc.items() if val is not None}


def _list(doc: dict, key: str, what: str, *, where: str) -> list:
    """``doc[key]``, a JSON list (of ``what``), else a :class:`ValidationError` naming the key
    (a number was an internal error, a string or an object was read item by item)."""
    val = doc[key]
    if not isinstance(val, list):
        raise ValidationError(f"{key} must be a list of {what}, not {json_text(val)}", file=where,
                              field=key)
    return val


#: The keys a topology file gives (docs/TOPOLOGY.md §2), in the order of its table.
TOPOLOGY_KEYS = ("format", "name", "platform", "nodes", "lnc_size", "lnc_sizes",
                 "devices_per_node", "device", "torus", "links", "device_cycles", "routing_ids",
                 "kangaring", "mesh", "mesh_sub_type", "hw_generation")
#: The keys of ``device``.
DEVICE_KEYS = ("dies", "sengines_per_die", "tpbs_per_sengine", "c2c_ports")
#: The platform fields of a topology object (:func:`platform_json`), every one of which a
#: file naming a custom platform in ``platform`` gives (``torus`` excepted: ``links`` give
#: the devices; ``mesh_sub_type`` too when ``mesh`` is false: it is never used then).
PLATFORM_FIELD_KEYS = ("lnc_sizes", "devices_per_node", "device", "links", "device_cycles",
                       "routing_ids", "kangaring", "mesh", "mesh_sub_type", "hw_generation",
                       "torus")
#: Keys our outputs write in a topology object beside :data:`TOPOLOGY_KEYS`, which a loader
#: ignores, so the object loads back as a topology file: ``Topology.to_json`` (``ranks``,
#: ``ranks_per_device``, ``ranks_per_node``), the output manifest's ``topology``
#: (``cce_max_elements``, ``ranks``; docs/FORMATS.md §1.1) and ``explain --json``'s
#: (``source``, ``ranks_per_device``, ``ranks_per_node``, ``world_size``).  Beside them the
#: two outputs give every platform field of a platform that is not exactly a preset
#: (:func:`with_platform`), so the object loads that platform back, not the preset.
IGNORED_TOPOLOGY_KEYS = ("ranks", "ranks_per_device", "ranks_per_node", "cce_max_elements",
                         "source", "world_size")


def _check_keys(obj: dict, allowed: tuple[str, ...], ignored: tuple[str, ...], *, where: str,
                path: str = "") -> None:
    """Refuse a key of ``obj`` neither in ``allowed`` nor in ``ignored``, naming ``path``, the
    object holding it, as an assemble spec does (docs/ASSEMBLE.md: ``unknown key "node"
    (allowed: ...)``); until 2026-12-06 such a key was ignored, a typo such as ``"node": 3``
    lowering as though it were not there."""
    extra = [key for key in obj if key not in allowed and key not in ignored]
    if extra:
        also = f"; ignored: {', '.join(ignored)}" if ignored else ""
        listed = f"allowed: {', '.join(allowed)}{also}"
        # (an ignored key is a name too: "ranks_per_nod" is no "devices_per_node")
        raise ValidationError(f"unknown key {json_text(extra[0])}"
                              f"{did_you_mean(extra[0], allowed + ignored, listed, json_text)}",
                              file=where, field=path or None)


def _named_custom(doc: dict, name: Any, where: str) -> str:
    """The custom platform a file's ``platform`` names when it is no preset (``doc`` its keys
    given): accepted only from a file that gives every platform field
    (:data:`PLATFORM_FIELD_KEYS` but ``torus``; ``mesh_sub_type`` but with ``mesh`` false),
    as an output's ``topology`` object records a platform that is not exactly a preset
    (docs/TOPOLOGY.md §2), nothing left to a default, and only the name the custom platform
    has anyway: the file's ``name``, or ``custom``.  Else a :class:`ValidationError` naming
    ``platform``: a typo (``"trn22"`` beside a few keys) is refused, not read as a custom
    platform half made of defaults (until 2026-12-06 any such name was refused, so an
    output's topology object of a custom platform did not load back)."""
    listed = f"one of {', '.join(sorted(PRESETS))}; leave it out for a custom one"
    # (the parenthesis did_you_mean writes, left open: the missing fields may follow)
    hint = did_you_mean(name, PRESETS, listed, json_text)
    head = f"unknown platform {json_text(name)}{hint[:-1]}"
    if not isinstance(name, str) or not name.strip():
        raise ValidationError(f"{head})", file=where, field="platform")
    dev = doc.get("device")
    missing = [key for key in PLATFORM_FIELD_KEYS
               if key not in doc and key != "torus"
               and not (key == "mesh_sub_type" and doc.get("mesh") is False)]
    if isinstance(dev, dict):
        missing += [f"device.{key}" for key in DEVICE_KEYS if dev.get(key) is None]
    if missing:
        raise ValidationError(f"{head}, or name it beside every platform field; missing: "
                              f"{', '.join(missing)})", file=where, field="platform")
    own = doc.get("name")
    if name not in (own, "custom"):
        fix = (f"give \"platform\": {json_text(own)}" if own is not None else
               f"give \"name\": {json_text(name)} beside it")
        raise ValidationError(f"platform {json_text(name)} names a custom platform, which is "
                              f"named after the file's name or custom: {fix} (or \"platform\": "
                              "\"custom\")", file=where, field="platform")
    return name


def platform_from_json(doc: dict, *, where: str = "<json>") -> Platform:
    """Build a :class:`Platform` from a JSON topology document (docs/TOPOLOGY.md)."""
    if not isinstance(doc, dict):
        raise ValidationError("a topology file must hold a JSON object", file=where)
    raw = doc
    doc = given(doc)
    _check_text(doc, where)
    fmt = doc.get("format", TOPOLOGY_FORMAT)
    if fmt != TOPOLOGY_FORMAT:
        raise ValidationError(f"the topology format must be {json_text(TOPOLOGY_FORMAT)}, "
                              f"not {json_text(fmt)}",
                              file=where, field="format")
    # (after the format: a file of another format is refused for that, not for its first key
    # this one lacks)
    _check_keys(raw, TOPOLOGY_KEYS, IGNORED_TOPOLOGY_KEYS, where=where)
    base_name = doc.get("platform")
    custom_name = None
    if base_name is not None and base_name not in PRESETS:
        custom_name = _named_custom(doc, base_name, where)
        base_name = None
    if base_name is None and custom_name is None and doc.get("name") in PRESETS:
        # (the custom platform would be named after it: "platform": "trn2" in the output's
        # topology object, explain and simulate would read a preset's name; until 2026-12-06
        # taken so, and simulate took the name for the preset's)
        own = doc["name"]
        raise ValidationError(f"name {json_text(own)} is preset {own}'s, and a file without a "
                              "preset platform names its custom platform after its name: give "
                              f"\"platform\": {json_text(own)} to start from the preset, or "
                              "another name", file=where, field="name")
    base = preset_platform(base_name) if base_name is not None else None
    dev_doc = doc.get("device", {})
    if not isinstance(dev_doc, dict):
        raise ValidationError("device must be an object", file=where, field="device")
    _check_keys(dev_doc, DEVICE_KEYS, (), where=where, path="device")
    bdev = base.device if base else DeviceSpec()
    dev = DeviceSpec(**{key: _int(dev_doc, key, getattr(bdev, key), where=where, parent="device")
                        for key in DEVICE_KEYS})
    if min(dev.dies, dev.sengines_per_die, dev.tpbs_per_sengine) < 1 or dev.c2c_ports < 0:
        raise ValidationError("device counts must be positive", file=where, field="device")
    if dev.tpbs > MAX_CORES_PER_DEVICE or dev.c2c_ports > MAX_DEVICES_PER_NODE:
        raise LimitError(f"a device of {dev.tpbs} cores and {dev.c2c_ports} C2C ports exceeds "
                         f"{MAX_CORES_PER_DEVICE} cores (MAX_CORES_PER_DEVICE) or "
                         f"{MAX_DEVICES_PER_NODE} ports", file=where, field="device")
    torus = doc.get("torus")
    if torus is not None and not (_ints(torus) and len(torus) == 2 and min(torus) >= 1):
        raise ValidationError(f"torus must be [rows, cols], not {json_text(torus)}", file=where,
                              field="torus")
    links: dict[int, dict[int, int]]
    if "links" in doc:
        if base is None and "devices_per_node" not in doc:
            # (it said `devices_per_node must be an integer, not null` of a key not there)
            raise ValidationError("links need devices_per_node (the devices they join, "
                                  "0..devices_per_node - 1)", file=where,
                                  field="devices_per_node")
        n = _int(doc, "devices_per_node", base.devices_per_node if base else None, where=where)
        _check_devices(n, where)
        # Two passes: ports named by any entry first, then free ports for the rest.
        named: dict[tuple[int, int], int] = {}
        pairs: list[tuple[int, int]] = []
        # (an entry given again is the same link again: collapsed, as an output's links,
        # [a, port_a, b] each direction, give every link twice; skipped at once, so a file
        # of millions of one entry costs a set lookup each; checked first: JSON true is no
        # integer, and [0, true] is refused, not read as [0, 1] again)
        seen: set[tuple[int, ...]] = set()
        for item in _list(doc, "links", "links", where=where):
            key = tuple(item) if _ints(item) else None
            if key in seen:
                continue
            seen.add(key)  # (None: refused by _link_ends)
            a, pa, b, pb = _link_ends(item, key is not None, where)
            for d in (a, b):
                if not 0 <= d < n:
                    raise ValidationError(f"link device {d} outside 0..{n - 1}", file=where,
                                          field="links")
            if a == b:
                raise ValidationError(f"link {json_text(item)} joins device {a} to itself",
                                      file=where,
                                      field="links")
            for (x, y), port in (((a, b), pa), ((b, a), pb)):
                if port is None:
                    continue
                if not 0 <= port < dev.c2c_ports:
                    raise ValidationError(f"port {port} of device {x} outside "
                                          f"0..{dev.c2c_ports - 1}", file=where, field="links")
                if named.setdefault((x, y), port) != port:
                    raise ValidationError(f"device {x} reaches {y} on two ports", file=where,
                                          field="links")
            pairs.append((a, b))
        links = {d: {} for d in range(n)}
        for (x, y), port in named.items():
            if port in links[x].values():
                other = next(z for z, q in links[x].items() if q == port)
                raise ValidationError(f"port {port} of device {x} links it to both {other} and "
                                      f"{y}: a C2C port has one neighbour", file=where,
                                      field="links")
            links[x][y] = port
        for a, b in pairs:
            for x, y in ((a, b), (b, a)):
                if y not in links[x]:
                    free = sorted(set(range(dev.c2c_ports)) - set(links[x].values()))
                    if not free:
                        raise ValidationError(f"device {x} has more links than its "
                                              f"{dev.c2c_ports} C2C ports", file=where,
                                              field="links")
                    links[x][y] = free[0]
        if torus is not None and torus[0] * torus[1] != n:
            raise ValidationError(f"devices_per_node {n} != torus {torus[0]}x{torus[1]}",
                                  file=where, field="devices_per_node")
        torus_t = tuple(torus) if torus is not None else None
    elif torus is not None:
        rows, cols = torus
        n = rows * cols
        _check_devices(n, where)
        if "devices_per_node" in doc and _int(doc, "devices_per_node", where=where) != n:
            raise ValidationError(f"devices_per_node {doc['devices_per_node']} != torus "
                                  f"{rows}x{cols}", file=where, field="devices_per_node")
        links = torus_links(rows, cols, dev.c2c_ports)
        torus_t = (rows, cols)
    elif base is not None:
        n, links, torus_t = base.devices_per_node, base.links, base.torus
        if dev.c2c_ports != bdev.c2c_ports and torus_t is not None:
            # the preset's torus on the file's ports: a device of fewer ports has only ports
            # 0 .. c2c_ports - 1 (until 2026-12-06 it kept the preset's 4-port links, so
            # ports it lacks were used and the output's topology object did not load back)
            links = torus_links(*torus_t, dev.c2c_ports)
        if "devices_per_node" in doc and _int(doc, "devices_per_node", where=where) != n:
            raise ValidationError(f"devices_per_node {json_text(doc['devices_per_node'])} "
                                  "differs from "
                                  f"platform {base.name}'s {n}; give torus or links to change "
                                  "the devices", file=where, field="devices_per_node")
    else:
        raise ValidationError("a topology file needs torus, links or a platform preset",
                              file=where)
    if n < 1:
        raise ValidationError("devices_per_node must be >= 1", file=where, field="devices_per_node")

    if "device_cycles" in doc:
        cycles: dict[frozenset, tuple[int, ...]] = {}  # a cycle's links -> the cycle (in order)
        for cyc in _list(doc, "device_cycles", "device cycles", where=where):
            if not _ints(cyc) or sorted(cyc) != list(range(n)):
                raise ValidationError(f"each device cycle must list every device 0..{n - 1} once",
                                      file=where, field="device_cycles")
            for i, d in enumerate(cyc):
                nxt = cyc[(i + 1) % n]
                if n > 1 and nxt not in links[d]:
                    raise ValidationError(f"device cycle step {d} -> {nxt} is not a link",
                                          file=where, field="device_cycles")
            edges = frozenset(frozenset((d, cyc[(i + 1) % n])) for i, d in enumerate(cyc))
            if edges in cycles:
                raise ValidationError(f"device cycle {len(cycles)} is device cycle "
                                      f"{list(cycles).index(edges)} again (the same links, "
                                      "perhaps reversed or opened elsewhere): channels would "
                                      "repeat its rings", file=where,
                                      field=f"device_cycles[{len(cycles)}]")
            cycles[edges] = tuple(cyc)
        device_cycles = tuple(cycles.values())
    elif base is not None and links == base.links:
        device_cycles = base.device_cycles
    else:
        device_cycles = _find_device_cycles(n, links)

    rids = doc.get("routing_ids", list(range(n)))
    if not (_ints(rids) and len(rids) == n):
        raise ValidationError(f"routing_ids must list {n} integers", file=where,
                              field="routing_ids")
    bad = [v for v in rids if not 0 <= v <= CAYMAN_ID_MASK]
    if bad:
        raise ValidationError(f"routing id {bad[0]} outside 0..{CAYMAN_ID_MASK}: a device is "
                              "addressed by the 6-bit CAYMAN_ID of the SoC address",
                              file=where, field="routing_ids")
    if len(set(rids)) != n:
        dup = next(v for v in rids if rids.count(v) > 1)
        raise ValidationError(f"routing id {dup} is given to two devices: each device needs "
                              "its own", file=where, field="routing_ids")
    lnc_sizes = doc.get("lnc_sizes", list(base.lnc_sizes) if base else
                        [s for s in (1, 2) if dev.tpbs % s == 0])
    if not (_ints(lnc_sizes) and lnc_sizes and min(lnc_sizes) >= 1):
        raise ValidationError("lnc_sizes must be a list of positive integers", file=where,
                              field="lnc_sizes")
    for i, size in enumerate(lnc_sizes):
        if dev.tpbs % size:
            raise ValidationError(f"lnc_size {size} does not divide the {dev.tpbs} cores of a "
                                  "device", file=where, field=f"lnc_sizes[{i}]")
        if size in lnc_sizes[:i]:
            raise ValidationError(f"lnc_size {size} is listed twice", file=where,
                                  field=f"lnc_sizes[{i}]")
    mst = doc.get("mesh_sub_type", (base.mesh_sub_type if base else EncAlgMeshType.FULL_MESH).name)
    if mst not in MESH_SUB_TYPE_NAMES:
        listed = f"one of {', '.join(MESH_SUB_TYPE_NAMES)}"
        raise ValidationError(f"unknown mesh_sub_type {json_text(mst)}"
                              f"{did_you_mean(mst, MESH_SUB_TYPE_NAMES, listed, json_text)}",
                              file=where, field="mesh_sub_type")
    mesh_sub_type = EncAlgMeshType[mst]
    kangaring = _bool(doc, "kangaring", base.kangaring if base else False, where=where)
    if kangaring and (dev.dies != 2 or dev.sengines != 4):
        inherited = "kangaring" not in doc
        raise ValidationError("kangaring needs 2 dies of 2 s-engines (4 s-engines per MLA), "
                              f"the device has {dev.dies} x {dev.sengines_per_die}"
                              + (f" (kangaring is platform {base.name}'s: give \"kangaring\": "
                                 "false)" if inherited and base is not None else ""),
                              file=where, field="kangaring")
    mesh = _bool(doc, "mesh", base.mesh if base else True, where=where)
    hw_generation = doc.get("hw_generation", base.hw_generation if base else DEFAULT_HW_GENERATION)
    if not _is_int(hw_generation) or hw_generation not in HW_GENERATIONS:
        raise ValidationError(f"hw_generation must be one of "
                              f"{', '.join(map(str, HW_GENERATIONS))} (the NeuronCore version: "
                              f"trn1 2, trn2 3), not {json_text(hw_generation)}", file=where,
                              field="hw_generation")
    return Platform(
        # (a custom platform: base_name is None, whether platform is absent or null, or
        # names the custom platform: custom_name)
        name=str(base_name if base is not None else
                 custom_name or doc.get("name", "custom")),
        device=dev, devices_per_node=n,
        links=links, device_cycles=device_cycles, routing_ids=tuple(rids),
        lnc_sizes=tuple(lnc_sizes), torus=torus_t, kangaring=kangaring,
        mesh=mesh, mesh_sub_type=mesh_sub_type,
        hw_generation=hw_generation,
    )


def parse_preset_spec(spec: str) -> tuple[str, dict[str, int]]:
    """``trn2`` or ``trn2:nodes=N`` (either preset): the preset's name and its options.  An
    empty option (``trn2:``, ``trn2:nodes=2,``), a repeated one, or a count written otherwise
    than as a plain positive number (``nodes=01``: the spec is the topology's recorded name)
    is refused."""
    name, colon, rest = spec.partition(":")
    opts: dict[str, int] = {}
    for part in rest.split(",") if colon else []:
        key, eq, val = part.partition("=")
        if (not eq or key not in ("nodes",) or key in opts or not val.isdigit()
                or val != str(int(val)) or int(val) < 1):
            why = "repeated" if key in opts and eq else "bad"
            # (a key not nodes, close to it: that option, its value kept)
            value = val if val.isdigit() else "N"
            hint = did_you_mean(key if key != "nodes" else None, ("nodes",),
                                "presets take nodes=N, e.g. trn2:nodes=2",
                                lambda k: repr(f"{k}={value}"))
            # (the option's text as UTF-8 whatever the locale: CLI.md "Paths in the output")
            raise ValidationError(f"{why} topology option {path_text(part)!r} in "
                                  f"{path_text(spec)!r}{hint}",
                                  field="topology")
        opts[key] = int(val)
    return name, opts


def _not_a_file(path: Path) -> str | None:
    """What is at ``path`` when it is no regular file to read a topology from (None: one
    is): the OS's reason it cannot be looked at, or what it is."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
    if stat.S_ISREG(mode):
        return None
    return "a folder" if stat.S_ISDIR(mode) else "not a regular file: a FIFO, a socket or a device"


def _preset_options_ok(spec: str) -> bool:
    """Does ``spec`` (a preset's name, perhaps with options) parse as a preset's?"""
    try:
        parse_preset_spec(spec)
    except ValidationError:
        return False
    return True


def read_topology_file(spec: str) -> Any:
    """The JSON document of the topology file ``spec``: only a regular file, refused from its
    size past :data:`MAX_TOPOLOGY_FILE_BYTES` before it is read, strict JSON
    (:class:`ValidationError` / :class:`LimitError` naming the file otherwise)."""
    if spec == "":  # (Path('') is '.', the working folder: blamed as "a folder")
        raise ValidationError("--topology '' is empty (omit it for the default: trn2 sized to "
                              "the model)", field="topology")
    path = Path(spec)
    if (what := _not_a_file(path)) is not None:
        # (a preset's name mistyped: that preset, with the options given if they are a
        # preset's; the name compared alone, not a path's: the options made any name close,
        # `foo:nodes=2` -> `trn2:nodes=2`, `C:\topo` -> `trn2:\topo`)
        name, colon, rest = spec.partition(":")
        hint = did_you_mean(None if set(name) & set("/.\\") else name, PRESETS,
                            "trn1, trn2, trn1:nodes=N, trn2:nodes=N",
                            lambda p: repr(p + colon + rest if _preset_options_ok(p + colon + rest)
                                           else p))
        # (the path as UTF-8 text whatever the locale: docs/CLI.md "Paths in the output")
        raise ValidationError(f"topology {path_text(spec)!r} is neither a preset{hint} nor a "
                              f"readable file ({what})", field="topology")
    try:
        if (size := path.stat().st_size) > MAX_TOPOLOGY_FILE_BYTES:
            raise LimitError(f"topology file of {size} bytes exceeds the limit of "
                             f"{MAX_TOPOLOGY_FILE_BYTES} bytes (MAX_TOPOLOGY_FILE_BYTES)",
                             file=str(path))
        doc = jsonin.loads(path.read_bytes())
    except jsonin.JsonRule as err:  # NaN, 1e999, a key twice, an integer of 5000 digits
        raise ValidationError(f"cannot read topology file: invalid JSON: {err.why}",
                              file=str(path), field=err.path) from None
    except RecursionError:
        raise ValidationError("cannot read topology file: invalid JSON: nested too deeply",
                              file=str(path)) from None
    except OSError as err:
        raise ValidationError(f"cannot read topology file: {err.strerror or err}",
                              file=str(path)) from None
    except ValueError as err:  # UnicodeDecodeError, JSONDecodeError
        raise ValidationError(f"cannot read topology file: {err}", file=str(path)) from None
    return doc


def load_topology(spec: str | None, *, world: tuple[int, ...], lnc_size: int,
                  lnc_of: str = "the model has lnc_size") -> Topology:
    """Resolve a ``--topology`` value.

    ``None`` -> trn2 at the model's ``lnc_size`` with as many nodes as ``world`` needs;
    ``"trn1"`` / ``"trn2"`` presets, optionally with a node count (``"trn2:nodes=2"``,
    ``"trn1:nodes=2"``); otherwise a path to a
    JSON topology file (docs/TOPOLOGY.md).  Every rank of ``world`` must exist.  ``lnc_of``
    says where ``lnc_size`` came from when a file's own differs (``explain``'s ``--lnc``).
    """
    world = tuple(world)
    lnc_size = lnc_size or 1
    if preset_of_spec(spec) is not None:
        name, opts = parse_preset_spec(spec or "trn2")
        platform = preset_platform(name)
        rpn = platform.ranks_per_device(lnc_size) * platform.devices_per_node \
            if lnc_size in platform.lnc_sizes else 1
        nodes = opts.get("nodes") or nodes_for(world, max(rpn, 1))
        if lnc_size in platform.lnc_sizes:
            check_topology_size(platform, lnc_size, nodes, world)
        topo = Topology(platform, lnc_size=lnc_size, nodes=nodes,
                        name=spec or None, preset_spec=spec or "default (trn2)")
        _check_world(topo, world)
        return topo
    path = Path(spec)
    doc = read_topology_file(spec)
    platform = platform_from_json(doc, where=str(path))
    doc = given(doc)  # (a JSON object: platform_from_json holds it to one)
    name = doc.get("name")
    if name is None:
        # the file's stem names it when the file does not: its bytes as UTF-8 whatever the
        # locale (until 2026-12-06 as the locale decoded them: under LC_ALL=C "tn\u00e9" was
        # "tn\udcc3\udca9", refused as not UTF-8), held to a name's rule (until 2026-12-06
        # a blank or non-UTF-8 stem went into the output manifest's topology.name, which
        # did not load back)
        try:
            name, why = name_text(path.stem), None
        except UnicodeDecodeError:
            name, why = path_text(path.stem), "is not UTF-8 text"
        if why is None and not name.strip():
            why = "is blank"
        if why is not None:
            raise ValidationError(f"the file gives no name and its file name's stem "
                                  f"{json_text(name)} {why}: give \"name\"", file=str(path),
                                  field="name")
    # (how the refusals below name it: by the file and its name, never as a preset)
    title = topology_title(str(name), path_text(path))
    file_lnc = _int(doc, "lnc_size", lnc_size, where=str(path))  # the model's when not given
    if file_lnc != lnc_size:
        raise ValidationError(f"the topology file's lnc_size should be {lnc_size} "
                              f"({lnc_of} {lnc_size}), not {file_lnc}", file=str(path),
                              field="lnc_size")
    if lnc_size not in platform.lnc_sizes:
        raise ValidationError(f"{title} supports lnc_size "
                              f"{'/'.join(map(str, platform.lnc_sizes))}, not {lnc_size}",
                              file=str(path), field="lnc_size")
    rpn = platform.ranks_per_device(lnc_size) * platform.devices_per_node
    nodes = doc.get("nodes")
    if nodes is None:
        nodes = nodes_for(world, rpn)
    if not _is_int(nodes) or nodes < 1:
        raise ValidationError(f"nodes must be a positive integer, not {json_text(nodes)}",
                              file=str(path),
                              field="nodes")
    # the file's nodes, or (when it gives none) the count sized to the model's ranks
    check_topology_size(platform, lnc_size, nodes, world, file=str(path), field="nodes",
                        title=title)
    topo = Topology(platform, lnc_size=lnc_size, nodes=nodes,
                    name=str(name), file=path_text(path))  # (as options.topology)
    _check_world(topo, world, file=str(path), field="nodes" if "nodes" in doc else "topology")
    return topo
