"""The world as the output folder describes it: ranks and their cores, the memory map, and the
decoding of SoC addresses (docs/FORMATS.md §10) into (rank, region, byte offset).

Address decoding is vectorised: a whole rank's BD array is resolved in one call, and each
address gets an error code (0 = fine) so that the caller can report the first bad record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nrtrewrite.codes import MESH_SUB_TYPE_NAMES, SBUF_PARTITIONS, EncAlgMeshType
from nrtrewrite.emit.address import (
    CAYMAN_ID_MASK, CAYMAN_ID_SHIFT, CORE_WINDOW, DIE_BIT, DRAM_BASE, EVT_SEM_BASE, EVT_SEM_DEC,
    EVT_SEM_INC, EVT_SEM_READ, EVT_SEM_SET, EVT_SEM_STRIDE, LOCAL_MASK, SBUF_BASE,
    SEMAPHORES_PER_CORE, TOPSP_STRIDE_SHIFT,
)
from nrtrewrite.emit.tiling import HW_GENERATIONS, MAX_SDMA_CCE_ELEMENTS, SDMA_MAX_CCE_ELEMENTS
from nrtrewrite.errors import (SimulationError, ValidationError, counted, escape_controls,
                               json_text)
from nrtrewrite.jsonin import joined_key
from nrtrewrite.simulate.fields import Field, json_kind
from nrtrewrite.topology.model import (
    MAX_CORES_PER_DEVICE, MAX_DEVICES_PER_NODE, MAX_TOPOLOGY_RANKS, PRESETS, Platform,
    first_unlinked, link_components, nodes_for, parse_preset_spec, preset_of_spec, preset_platform,
)

REGION_KINDS = ("dram", "sbuf", "scratch", "gw")
#: The highest logical core whose window (``lc << 36``) lies inside LOCAL [46:0] (FORMATS §10).
MAX_LOGICAL_CORE = (LOCAL_MASK + 1) // CORE_WINDOW - 1

#: Error codes of :meth:`Layout.resolve_data` / :meth:`Layout.resolve_sema`.
E_OK = 0
E_HIGH = 1
E_CAYMAN = 2
E_DIE = 3
E_SELF = 4
E_CORE = 5
E_REGION = 6
E_PAST = 7
E_SEMA = 8

ADDRESS_ERRORS = {
    E_HIGH: "has bits above CAYMAN_ID_VALID [54] set",
    E_CAYMAN: "has CAYMAN_ID bits without CAYMAN_ID_VALID",
    E_DIE: "has the DIE bit [47] set, which no data address of FORMATS §10 uses",
    E_SELF: "is routed to the issuing rank's own device (a same-device target must use the "
            "plain local address)",
    E_CORE: "targets a (device, core) where no rank of the world lives",
    E_REGION: "maps to no region of the memory map",
    E_PAST: "runs past the end of its region",
    E_SEMA: "is not an EVT_SEM semaphore address",
}

WINDOWS = (EVT_SEM_READ, EVT_SEM_SET, EVT_SEM_INC, EVT_SEM_DEC)
WINDOW_NAMES = {EVT_SEM_READ: "READ", EVT_SEM_SET: "SET", EVT_SEM_INC: "INC", EVT_SEM_DEC: "DEC"}


@dataclass(frozen=True)
class Region:
    index: int
    name: str
    kind: str
    offset: int
    size: int  # bytes (per partition for sbuf)
    partitions: int
    subgraph: str | None
    var_id: int | None

    @property
    def storage(self) -> int:
        """Bytes of the simulator's buffer (partition-major for sbuf)."""
        return self.size * self.partitions


@dataclass(frozen=True)
class RankPlace:
    rank: int
    node: int
    device: int  # routing id of the device (CAYMAN_ID)
    core: int  # logical core on the device (window and TOP_SP index)
    #: the first TPB of the logical core and its s-engine (docs/TOPOLOGY.md §1), checked for
    #: every rank (Layout._check_places), the s-engine also where it decides a KANGARING
    #: unit (triggers.check_kangaring_units); the row's key path, for their errors
    tpb: int = 0
    sengine: int = 0
    path: str = ""
    #: the device's index within its node and the die of its s-engine (docs/TOPOLOGY.md §1),
    #: held with the rest of the place to the platform's shape (Layout._check_places)
    index: int = 0
    die: int = 0


#: The platform keys of the manifest's ``topology`` (FORMATS §1.1).
PLATFORM_KEYS = ("platform", "hw_generation", "cce_max_elements")
#: The keys of the platform's shape in the manifest's ``topology``, recorded (with the other
#: platform fields) for a platform that is not exactly a preset (FORMATS §1.1).
RECORDED_SHAPE_KEYS = ("devices_per_node", "device", "routing_ids")


def _read_platform(topo: Field) -> tuple[str, int, int] | None:
    """The platform keys of the manifest's ``topology`` read with their types (FORMATS §1.1:
    ``platform`` a string, ``hw_generation`` and ``cce_max_elements`` integers; an
    :class:`OutputError` naming the key otherwise), what they say unchecked
    (:func:`_platform`).  None for a manifest written before the platform was recorded (none
    of :data:`PLATFORM_KEYS`); the three come together, so one that has any has all."""
    if not any(topo.has(k) for k in PLATFORM_KEYS):
        return None
    return topo["platform"].str(), topo["hw_generation"].int(), topo["cce_max_elements"].int()


def _platform(recorded: tuple[str, int, int] | None, file: str
              ) -> tuple[str | None, int | None, int]:
    """(name, hw_generation, CCE element cap) of the platform the lowering used, from the
    manifest's ``topology`` as :func:`_read_platform` read it; the cap is the seed's for the
    generation (seed 000 §3.4), and the manifest's ``cce_max_elements`` must be it.  For a
    manifest written before the platform was recorded: name and generation None, the cap
    the largest of any generation (no lowering of any platform goes over it)."""
    if recorded is None:
        return None, None, MAX_SDMA_CCE_ELEMENTS
    name, gen, cap = recorded

    def err(key: str, value, why: str) -> SimulationError:
        return SimulationError(f"topology.{key} is {json_kind(value)}: {why}", file=file,
                               field=joined_key("topology", key))

    if not name:
        raise err("platform", name, "the platform's name must be a non-empty string")
    if gen not in SDMA_MAX_CCE_ELEMENTS:
        raise err("hw_generation", gen, "the hardware generation must be one of "
                  f"{', '.join(map(str, HW_GENERATIONS))} (the NeuronCore version: trn1 2, "
                  "trn2 3)")
    want = SDMA_MAX_CCE_ELEMENTS[gen]
    if cap != want:
        raise err("cce_max_elements", cap, f"hw_generation {gen} caps a CCE descriptor at "
                  f"{want} elements (aws_hal_get_sdma_max_cce_elements, seed 000 §3.4)")
    return name, gen, want


def _fit_shape(cols: dict[str, np.ndarray], lnc_size: int
               ) -> tuple[int, int | None, int, int]:
    """(ranks a device, devices a node or None when every rank is on node 0, TPBs an
    s-engine, s-engines a die) of a topology file's platform, whose shape the manifest does
    not hold: of the shapes docs/TOPOLOGY.md §1 allows (at most MAX_CORES_PER_DEVICE cores,
    MAX_DEVICES_PER_NODE devices), the one the most rows of the table fit, the smallest on
    a tie (each part on its own: the rank numbering, of the fewest ranks a node when every
    row fits, then of the fewest ranks a device; then the s-engines of the TPBs, then the
    dies of the s-engines).  ``lower``'s rows fit their platform's shape, all of them."""
    rank, node, dev, lc = cols["rank"], cols["node"], cols["device"], cols["logical_core"]
    far = node > 0
    best: tuple[int, int, int | None] = (-1, 0, None)  # (rows fitted, rpd, dpn)
    # (lnc_size is a positive integer on any platform; a hand-edited one still tries 1)
    for rpd in range(1, max(MAX_CORES_PER_DEVICE // max(lnc_size, 1), 1) + 1):
        q, rem = np.divmod(rank, rpd)
        fit = rem == lc
        dpn = None
        if far.any():
            num, den = q[far] - dev[far], node[far]
            whole = (num % den == 0) & (num > 0)
            cands = num[whole] // den[whole]
            cands = cands[cands <= MAX_DEVICES_PER_NODE]
            if cands.size:
                values, counts = np.unique(cands, return_counts=True)
                dpn = int(values[np.argmax(counts)])
        if dpn is None:
            fit &= ~far & (q == dev) & (dev < MAX_DEVICES_PER_NODE)
        else:
            fit &= (q == node * dpn + dev) & (dev < dpn)
        n = int(fit.sum())
        # (of shapes every row fits, the fewest ranks a node: a table lower writes fits its
        # own shape, so this is at most its platform's, and topology.nodes is held to no
        # tighter bound than lower's; until 2026-12-06 the fewest ranks a device: ranks 0 and
        # 68 of a file exactly trn2 at lnc 2 read as 33 devices of 2 ranks, 66 a node, and
        # a file's "nodes": 16000, which lower takes, was refused.  Of shapes only some
        # rows fit, the fewest ranks a device, as before: the shape a refusal names)
        if n > best[0] or (n == best[0] == rank.size and dpn and best[2]
                           and rpd * dpn < best[1] * best[2]):
            best = (n, rpd, dpn)
    tpb, seng, die = cols["tpb"], cols["sengine"], cols["die"]
    tps = max(range(1, MAX_CORES_PER_DEVICE + 1),
              key=lambda t: (int((seng == tpb // t).sum()), -t))
    spd = max(range(1, MAX_CORES_PER_DEVICE + 1),
              key=lambda t: (int((die == seng // t).sum()), -t))
    return best[1], best[2], tps, spd


def _preset_shape(plat: Platform, lnc_size: int) -> tuple[int, int, int, int]:
    """(ranks a device, devices a node, TPBs an s-engine, s-engines a die) of ``plat``."""
    return (plat.ranks_per_device(lnc_size), plat.devices_per_node,
            plat.device.tpbs_per_sengine, plat.device.sengines_per_die)


def _fits(cols: dict[str, np.ndarray], shape: tuple[int, int | None, int, int]) -> bool:
    """Whether every row of the table ``cols`` fits ``shape`` (as :func:`_fit_shape`
    gives one) as :meth:`Layout` holds the rows to it."""
    rpd, dpn, tps, spd = shape
    q, lc = np.divmod(cols["rank"], rpd)
    node, dev = (q // dpn, q % dpn) if dpn else (np.zeros_like(q), q)
    return bool((cols["node"] == node).all() and (cols["device"] == dev).all()
                and (cols["logical_core"] == lc).all()
                and (cols["sengine"] == cols["tpb"] // tps).all()
                and (cols["die"] == cols["sengine"] // spd).all())


class Layout:
    """Memory map + topology table of an output folder (OUT/manifest.json).

    ``Layout(top)`` reads every value it takes with its type checked (:meth:`typed`: an
    :class:`OutputError`, status 2), then checks what the values say (:meth:`check`: a
    :class:`SimulationError`, status 1), so a wrong type is status 2 wherever its key sits;
    the simulator reads the triggers' types too before it checks any value."""

    def __init__(self, top: dict, *, file: str = ""):
        self._read(top, file)
        self.check()

    @classmethod
    def typed(cls, top: dict, *, file: str = "") -> "Layout":
        """The layout's values read with their types checked, none of them checked yet
        (:meth:`check` before use)."""
        self = cls.__new__(cls)
        self._read(top, file)
        return self

    def _read(self, top: dict, file: str) -> None:
        self.file = file
        doc = Field(top, "", file)
        mem = doc["memory"]
        self._fixed = {key: mem[key].int() for key in ("core_window", "dram_base", "sbuf_base")}
        self.stride = mem["sbuf_partition_stride"].int(0)
        #: a tuple: :meth:`named`'s index cannot go stale under an in-place change
        self.regions: tuple[Region, ...] = tuple(
            Region(i, reg["name"].str(), reg["kind"].str(), reg["offset"].int(),
                   reg["size"].int(), reg["partitions"].int(),
                   reg["subgraph"].opt_str(), reg["var_id"].opt_int())
            for i, reg in enumerate(mem["regions"].items()))
        topo = doc["topology"]
        #: (key path, place) of each row of ``topology.ranks``, as written
        self._rows = [(info.path, RankPlace(info["rank"].int(0), info["node"].int(),
                                            info["routing_id"].int(),
                                            info["logical_core"].int(), info["tpb"].int(0),
                                            info["sengine"].int(0), info.path,
                                            info["device"].int(0), info["die"].int(0)))
                      for info in topo["ranks"].items()]
        self.lnc_size = topo["lnc_size"].int()
        #: the topology's node count: every rank's node is one of 0 .. nodes - 1
        self.nodes = topo["nodes"].int(1)
        #: the topology's recorded name (a preset's is its --topology value: _check_preset)
        self.topology_name = topo["name"].str()
        #: the platform keys (None: not recorded) and mesh_sub_type, typed: checked as values
        self._platform = _read_platform(topo)
        #: the platform's shape as the manifest records it whole (a platform that is not
        #: exactly a preset, since 2026-12-06: FORMATS §1.1): (devices_per_node, dies,
        #: sengines_per_die, tpbs_per_sengine, routing_ids); None when not recorded
        self._recorded_shape: tuple[int, int, int, int, tuple[int, ...]] | None = None
        if any(topo.has(key) for key in RECORDED_SHAPE_KEYS):
            dev = topo["device"]
            self._recorded_shape = (
                topo["devices_per_node"].int(), dev["dies"].int(),
                dev["sengines_per_die"].int(), dev["tpbs_per_sengine"].int(),
                tuple(topo["routing_ids"].ints()))
        #: the links of the platform the manifest records whole, ``(a, port, b)`` each (the
        #: output manifest writes ``[a, port, b]``: FORMATS §1.1); None when not recorded
        self.links: tuple[tuple[int, int, int], ...] | None = None
        if self._recorded_shape is not None and topo.has("links"):
            self.links = tuple(tuple(item.ints(length=3)) for item in topo["links"].items())
        self._components: tuple[int, ...] | None = None  # (unlinked_devices, once built)
        #: whether the manifest has ``mesh_sub_type`` (new on 2026-12-04), and its value
        self.mesh_sub_type_recorded = topo.has("mesh_sub_type")
        self._mesh_sub_name = topo.get("mesh_sub_type").opt_str()
        self.world = doc["world"].ints(0)
        #: the --topology value the output was lowered with (FORMATS §1.1 ``options``): a
        #: preset's name (null: the default, trn2) or a topology file's path
        self.topology_option = doc["options"]["topology"].opt_str()
        #: the --algo override that applied (null: none) and --host-cc (FORMATS §1.1
        #: ``options``), held to the triggers (triggers.check_options)
        self.algo_option = doc["options"]["algo"].opt_str()
        self.host_cc = doc["options"]["host_cc"].bool()

    def check(self) -> None:
        """What the typed values say (FORMATS §1.1, §10): a :class:`SimulationError` naming
        the key otherwise; then the address tables are built."""
        file = self.file

        def err(why: str) -> SimulationError:
            return SimulationError(why, file=file, field="memory")
        for key, want in (("core_window", CORE_WINDOW), ("dram_base", DRAM_BASE),
                          ("sbuf_base", SBUF_BASE)):
            if (got := self._fixed[key]) != want:
                raise err(f"memory.{key} is {got!r}; FORMATS §10 fixes it at {want:#x}")
        for r in self.regions:
            if r.kind not in REGION_KINDS or r.offset < 0 or r.size < 0:
                raise err(f"memory region {json_text(r.name)}: bad kind/offset/size")
            if r.kind != "sbuf" and r.partitions != 1:
                raise err(f"memory region {json_text(r.name)}: only sbuf regions have partitions")
            if r.kind == "sbuf" and not 1 <= r.partitions <= SBUF_PARTITIONS:
                raise err(f"memory region {json_text(r.name)}: {r.partitions} partitions")
        # one region per var (FORMATS §10: the vars of each subgraph by var_id, and NEFF-LIKE's
        # def.json has each var_id once, as the model's reader holds it): a var given twice
        # is refused, where until 2026-12-07 the last of them was taken here and the first
        # by lower's MemoryMap.var
        first: dict[tuple[str | None, int], Region] = {}
        for r in self.regions:
            if r.var_id is None:
                continue
            was = first.setdefault((r.subgraph, r.var_id), r)
            if was is not r:
                raise SimulationError(
                    f"var {r.var_id} of {json_text(r.subgraph)} is given twice, in "
                    f"memory.regions[{was.index}] ({json_text(was.name)}) and here "
                    f"({json_text(r.name)}): a var has one region (FORMATS §10)",
                    file=file, field=f"memory.regions[{r.index}].var_id")
        dram = sorted((r for r in self.regions if r.kind != "sbuf" and r.size), key=lambda r: r.offset)
        sbuf = sorted((r for r in self.regions if r.kind == "sbuf" and r.size), key=lambda r: r.offset)
        for group in (dram, sbuf):
            for a, b in zip(group, group[1:]):
                if a.offset + a.size > b.offset:
                    raise err(f"memory regions {json_text(a.name)} and {json_text(b.name)} overlap")
        if dram and DRAM_BASE + dram[-1].offset + dram[-1].size > SBUF_BASE:
            raise err("the DRAM regions run into the SBUF window")
        if sbuf and sbuf[-1].offset + sbuf[-1].size > self.stride:
            raise err("an SBUF region is wider than sbuf_partition_stride")
        if sbuf and SBUF_BASE + max(r.partitions for r in sbuf) * self.stride > CORE_WINDOW:
            raise err("the SBUF partitions run past the core window")
        self._d_start = np.array([r.offset for r in dram], np.int64)
        self._d_end = np.array([r.offset + r.size for r in dram], np.int64)
        self._d_idx = np.array([r.index for r in dram], np.int64)
        self._s_start = np.array([r.offset for r in sbuf], np.int64)
        self._s_end = np.array([r.offset + r.size for r in sbuf], np.int64)
        self._s_idx = np.array([r.index for r in sbuf], np.int64)
        self._s_parts = np.array([r.partitions for r in sbuf], np.int64)
        self._s_size = np.array([r.size for r in sbuf], np.int64)
        self._by_var = {(r.subgraph, r.var_id): r for r in self.regions if r.var_id is not None}

        self.platform, self.hw_generation, self.cce_max_elements = _platform(self._platform,
                                                                             file)
        #: the platform of the preset options.topology names (None: a topology file), the
        #: output's; platform_derived: the manifest records no platform keys, so the
        #: platform (and the CCE cap) is the preset's
        name = preset_of_spec(self.topology_option)
        self.preset: Platform | None = None if name is None else preset_platform(name)
        self.platform_derived = False
        if self.preset is not None:
            self._check_preset(self.preset)
        else:
            self._check_file_name()
        #: the platform's mesh sub-type (an intra-node mesh entry's algo_sub_type), None when
        #: the platform has no mesh; absent from a manifest written before it was recorded
        self.mesh_sub_type: int | None = None
        sub = self._mesh_sub_name
        if sub is not None:
            if sub not in MESH_SUB_TYPE_NAMES:
                raise SimulationError(f"topology.mesh_sub_type is {json_kind(sub)}: one of "
                                      f"{', '.join(MESH_SUB_TYPE_NAMES)}, or null (no mesh)",
                                      file=file, field="topology.mesh_sub_type")
            self.mesh_sub_type = int(EncAlgMeshType[sub])
        if self.preset is not None and self.mesh_sub_type_recorded:
            # (lower writes the preset's: trn2 MESH_TRN2, trn1 GROUPED_MESH; until 2026-12-05
            # any name was taken, so a trn2 output edited to GROUPED_MESH, its mesh entries'
            # algo_sub_type with it, simulated as a match)
            plat = self.preset
            want = plat.mesh_sub_type.name if plat.mesh else None
            if sub != want:
                raise SimulationError(f"topology.mesh_sub_type should be {json_kind(want)}, "
                                      f"{plat.name}'s, not {json_kind(sub)} (the platform of "
                                      f"{self.option_text()}: docs/TOPOLOGY.md §1)",
                                      file=file, field="topology.mesh_sub_type")
        self.places: dict[int, RankPlace] = {}
        for path, p in self._rows:
            if not 0 <= p.node < self.nodes:
                raise SimulationError(f"rank {p.rank}: node {p.node} is outside 0..{self.nodes - 1}"
                                      f" (topology.nodes is {self.nodes})", file=file,
                                      field=joined_key(path, "node"))
            # FORMATS §10: the routing id is CAYMAN_ID [53:48] of a SoC address, the core's
            # window (lc << 36) lies inside LOCAL [46:0]
            for key, value, top in (("routing_id", p.device, CAYMAN_ID_MASK),
                                    ("logical_core", p.core, MAX_LOGICAL_CORE)):
                if not 0 <= value <= top:
                    raise SimulationError(f"rank {p.rank}: {key} {value} is outside 0..{top}",
                                          file=file, field=joined_key(path, key))
            if p.rank in self.places:  # (the later entry used to replace the earlier)
                raise SimulationError(f"rank {p.rank} is listed twice", file=file,
                                      field=joined_key(path, "rank"))
            self.places[p.rank] = p
        missing = [r for r in self.world if r not in self.places]
        if missing:
            raise SimulationError(f"rank {missing[0]} of the world is not in the topology table",
                                  file=file, field="topology")
        # every row where docs/TOPOLOGY.md §1 puts its rank first, naming the row's own key
        # (until 2026-12-05 a preset's row moved onto another rank's core was named by the
        # check below, `field topology: ranks X and Y share a core`, not by its device)
        self._check_places()
        self.max_core = max([p.core for p in self.places.values()] + [0])
        # (node, device, core) -> rank, dense over the nodes that have ranks (a node's row:
        # _node_row), so that the table's size follows the ranks, not the node numbers
        self._node_row = {n: i for i, n in enumerate(sorted({p.node for p in
                                                             self.places.values()}))}
        self._core_table = np.full((max(len(self._node_row), 1), CAYMAN_ID_MASK + 1,
                                    self.max_core + 1), -1, np.int64)
        for p in self.places.values():
            row = self._node_row[p.node]
            # (a backstop: rows where §1 puts their ranks, each device its own routing id,
            # never share a core)
            if self._core_table[row, p.device, p.core] >= 0:
                raise SimulationError(f"ranks {self._core_table[row, p.device, p.core]} and "
                                      f"{p.rank} share a core", file=file, field="topology")
            self._core_table[row, p.device, p.core] = p.rank

    @property
    def mesh_sub_type_name(self) -> str | None:
        """The manifest's ``topology.mesh_sub_type`` as written (None: null or absent)."""
        return self._mesh_sub_name

    def option_text(self) -> str:
        """options.topology as a message names it."""
        opt = self.topology_option
        return ("options.topology null (the default, trn2)" if opt is None else
                f"options.topology {json_kind(opt)}")

    def _check_preset(self, plat: Platform) -> None:
        """An output lowered on a preset (``options.topology`` null, ``trn1`` or ``trn2``, with
        or without ``nodes=N``: :func:`preset_of_spec`, lower's own reading) is on that
        preset's platform (docs/TOPOLOGY.md §1 "Presets"): its ``lnc_size`` one the preset
        supports, and its platform keys, when recorded, the preset's name and hardware
        generation (``lower`` writes both from it), else a :class:`SimulationError` naming the
        key.  Without them (written before 2026-12-01) the platform, its generation and its
        CCE cap are the preset's (``platform_derived``): until 2026-12-05 such an output was
        held to the largest cap, 2048 elements, also on trn1 (1024)."""
        file, opt = self.file, self.option_text()
        if self.lnc_size not in plat.lnc_sizes:
            raise SimulationError(f"topology.lnc_size should be one of {plat.name}'s lnc "
                                  f"sizes {', '.join(map(str, plat.lnc_sizes))}, not "
                                  f"{self.lnc_size} (the platform of "
                                  f"{opt}: docs/TOPOLOGY.md §1)", file=file,
                                  field="topology.lnc_size")
        self._check_preset_nodes(plat)
        if self._platform is None:
            self.platform, self.hw_generation = plat.name, plat.hw_generation
            self.cce_max_elements = SDMA_MAX_CCE_ELEMENTS[plat.hw_generation]
            self.platform_derived = True
            return
        for key, got, want in (("platform", self.platform, plat.name),
                               ("hw_generation", self.hw_generation, plat.hw_generation)):
            if got != want:
                raise SimulationError(f"topology.{key} should be {json_kind(want)}, {plat.name}'s, "
                                      f"not {json_kind(got)} (the platform of "
                                      f"{opt}: docs/TOPOLOGY.md §1)", file=file,
                                      field=f"topology.{key}")

    def _check_preset_nodes(self, plat: Platform) -> None:
        """A preset's ``topology.nodes`` and ``topology.name`` are what ``lower`` made of
        ``options.topology`` (docs/TOPOLOGY.md §1 "Loading"): ``nodes=N`` fixes the node
        count, else it is the nodes the world needs, ``ceil((max(world) + 1) /
        ranks_per_node)`` (1 for an empty world); the name is the option as given, and the
        default's (null) ``trn2``, or ``trn2:nodes=N`` past one node.  A
        :class:`SimulationError` naming the key otherwise.  A preset option the current
        ``lower`` does not take (older ones took ``trn2:nodes=02``, ``trn2:``) is not held.
        (A topology file's node count
        may exceed what its ranks need, and its name is its own: neither is held; until
        2026-12-05 neither key was held on a preset either.)"""
        file, opt = self.file, self.option_text()
        spec = self.topology_option
        try:
            _name, opts = parse_preset_spec(spec or plat.name)
        except ValidationError:
            # (a form lower took only before 2026-12-02, 0c46230, recorded as given:
            # `trn2:nodes=02`, `trn2:`, `trn2:nodes=2,`; such an output simulated as a match
            # and still does: its nodes and name are not held)
            return
        rpn = plat.ranks_per_device(self.lnc_size) * plat.devices_per_node
        if "nodes" in opts:
            want = opts["nodes"]
            why = f"the node count {opt} fixes (nodes=N: docs/TOPOLOGY.md §1 \"Loading\")"
        else:
            want = nodes_for(tuple(self.world), rpn)
            top = max(self.world, default=None)
            why = (f"the nodes of {counted(rpn, 'rank')} ({plat.name} at lnc_size "
                   f"{self.lnc_size}) that hold the world's largest rank {top}, "
                   f"ceil(({top} + 1) / {rpn}) ({opt} sizes the preset to the world: "
                   'docs/TOPOLOGY.md §1 "Loading")' if top is not None else
                   f"one node for an empty world ({opt} sizes the preset to the world: "
                   'docs/TOPOLOGY.md §1 "Loading")')
        if self.nodes != want:
            raise SimulationError(f"topology.nodes should be {want}, not {self.nodes}: {why}",
                                  file=file, field="topology.nodes")
        name = spec if spec is not None else (
            plat.name if want == 1 else f"{plat.name}:nodes={want}")
        if self.topology_name != name:
            whence = ("the --topology value as given (a preset's topology is named by it: "
                      if spec is not None else
                      f"the default's name at {counted(want, 'node')} (trn2, with :nodes=N "
                      "past one node: ")
            raise SimulationError(f"topology.name should be {json_kind(name)}, not "
                                  f"{json_kind(self.topology_name)}: {whence}"
                                  'docs/TOPOLOGY.md §1 "Loading")', file=file,
                                  field="topology.name")

    def _check_file_name(self) -> None:
        """A topology file's ``topology.name`` is the file's ``name``, else its path's stem,
        and a custom platform (a file without a preset ``platform``, or naming the custom
        platform beside every platform field) is named after the same ``name``, else
        ``custom`` (docs/TOPOLOGY.md §2; so since 2026-12-01, when the platform was first
        recorded): on a custom platform (``topology.platform`` not a preset's name) other
        than ``custom`` the topology's name is the platform's, else a
        :class:`SimulationError` naming the key.  On ``custom`` the name is the stem of
        ``options.topology``, or the ``name`` of a file that names its platform ``custom``
        (an output's topology object given back as ``--topology``): not held (until
        2026-12-06 held to the stem, when no file could name its platform).  A file on a
        preset platform names itself (the manifest does not hold its ``name``, and no byte
        depends on it): not held, nor without the platform keys.  A custom platform named
        ``trn2`` or ``trn1`` (``lower`` refuses the name since 2026-12-06) was recorded as a
        changed preset is, every field beside the name, and loads back as one, the same
        platform: held as one (its rows to the recorded fields, :meth:`_check_places`)."""
        if self._platform is None or self.platform in PRESETS:
            return
        name, plat = self.topology_name, self.platform
        if name == plat or plat == "custom":
            return
        want = f"{json_kind(plat)}, topology.platform's"
        why = ("a topology file without a preset platform names its custom platform after "
               "its name")
        raise SimulationError(f"topology.name should be {want}, not {json_kind(name)}: {why} "
                              "(docs/TOPOLOGY.md §2 name, platform)", file=self.file,
                              field="topology.name")

    def _check_file_nodes(self, rpn: int, exact: bool, whose: str) -> None:
        """A topology file's ``topology.nodes`` times its ranks a node (``rpn``; at least
        that when not ``exact``) is at most MAX_TOPOLOGY_RANKS, as ``lower`` loads a file
        (docs/TOPOLOGY.md §2 nodes), else a :class:`SimulationError` naming the key.  Above
        what the ranks need the count is the file's own (no byte depends on it): not held.
        Not held without the platform keys (an output written before 2026-12-01)."""
        if self._platform is None or rpn < 1:
            return
        most = MAX_TOPOLOGY_RANKS // rpn
        if self.nodes > most:
            at = "" if exact else "at least "
            raise SimulationError(
                f"topology.nodes should be at most {most}, not {self.nodes}: {self.nodes} "
                f"nodes x {at}{rpn} ranks a node = {at}{self.nodes * rpn} ranks, more than "
                f"{MAX_TOPOLOGY_RANKS} (MAX_TOPOLOGY_RANKS: lower loads no such topology "
                f"file, docs/TOPOLOGY.md §2 nodes; {whose})", file=self.file,
                field="topology.nodes")

    def _check_places(self) -> None:
        """Every row of ``topology.ranks`` is where docs/TOPOLOGY.md §1 puts its rank: ``node``
        ``rank // ranks_per_node``, ``device`` the next digit (``// ranks_per_device``),
        ``logical_core`` the rest, ``routing_id`` the device's, ``sengine`` its ``tpb`` //
        ``tpbs_per_sengine`` and ``die`` that // ``sengines_per_die``, else a
        :class:`SimulationError` naming the row's key: ``node``, ``device`` and
        ``logical_core`` first, then ``tpb`` (``logical_core`` x ``lnc_size``), then
        ``sengine`` and ``die``, then ``routing_id`` (a row moved onto another rank's core is
        named by its own key; until 2026-12-05 late evening ``tpb`` came first and the
        shared core was named before any row, ``field topology: ranks X and Y share a
        core``).  On a preset the shape
        is the preset's at the output's ``lnc_size`` (trn2 at lnc 2: device ``r // 4``,
        s-engine ``r % 4``, die ``(r % 4) >> 1``; routing id the device index).  A topology
        file's platform that is not exactly a preset is recorded whole (since 2026-12-06):
        its rows are held to its shape and routing ids (:meth:`_recorded`; until then they
        were not read, and a table contradicting them simulated as a match).  Otherwise a
        topology file's shape is not in the manifest (nor its routing ids): its rows are held
        to one shape §1 allows, the one the most of them fit (:func:`_fit_shape`), and each
        device index to one routing id of its own on every node.  Until 2026-12-05 ``device`` and
        ``die`` were not read, and ``sengine`` only in a KANGARING unit, against the
        manifest's own ``tpb``: a rank moved to another device or die, every key changed to
        match, simulated as a match where its artifacts agreed."""
        rows = self._rows
        if not rows:
            return
        cols = {key: np.array([getattr(p, attr) for _path, p in rows], np.int64)
                for key, attr in (("rank", "rank"), ("node", "node"), ("device", "index"),
                                  ("logical_core", "core"), ("tpb", "tpb"),
                                  ("sengine", "sengine"), ("die", "die"),
                                  ("routing_id", "device"))}
        if self.preset is not None:
            plat = self.preset
            shape = _preset_shape(plat, self.lnc_size)
            whose = f"{plat.name} at lnc_size {self.lnc_size}, the platform of " \
                    f"{self.option_text()}"
            rids = plat.routing_ids
        elif self._recorded_shape is not None:
            shape, rids = self._recorded(), self._recorded_shape[4]
            whose = ("the platform the manifest records: topology.devices_per_node, "
                     "topology.device, topology.routing_ids")
        elif (self.platform in PRESETS and (cols["node"] > 0).any() and _fits(
                cols, named := _preset_shape(preset_platform(self.platform), self.lnc_size))):
            # (a file exactly a preset, the manifest naming the preset alone, with a row on
            # another node: the preset's shape when every row fits it; until 2026-12-06 the
            # fewest ranks a node that fitted, which ranks 0 and 72 of trn2 at lnc 2 also
            # fit as 7 devices of 8 ranks: 56 a node, and topology.nodes was held to a looser
            # bound than lower's.  Rows all on node 0 do not tell a node's devices: an
            # nrtrewrite before 2026-12-06 08:28 named a changed preset alone too (fewer
            # devices a node, more nodes than the preset's bound), so the table's shape)
            shape, rids = named, None
            whose = (f"{self.platform} at lnc_size {self.lnc_size}, the platform the manifest "
                     "names, whose shape every row of the table fits")
        else:
            shape = _fit_shape(cols, self.lnc_size)
            whose = ("the shape most rows of the table fit: the platform of options.topology "
                     f"{json_kind(self.topology_option)}, a topology file, is not in the "
                     "manifest")
            rids = None
        rpd, dpn, tps, spd = shape
        rank = cols["rank"]
        q, lc = np.divmod(rank, rpd)
        want = {"node": q // dpn if dpn else np.zeros_like(q),
                "device": q % dpn if dpn else q, "logical_core": lc}
        self._refuse_misplaced(rows, cols, want, shape, whose)
        if not dpn:
            # (every rank on node 0, its device its rank // ranks a device: at most the
            # MAX_DEVICES_PER_NODE a node holds, docs/TOPOLOGY.md §2; until 2026-12-05 a table
            # naming devices past it was refused only by an address, in dma.bin)
            over = np.flatnonzero(cols["device"] >= MAX_DEVICES_PER_NODE)
            if over.size:
                path, p = rows[int(over[0])]
                raise SimulationError(
                    f"rank {p.rank}: device {p.index} is past the {MAX_DEVICES_PER_NODE} "
                    f"devices a node holds at most (docs/TOPOLOGY.md §2; {whose})",
                    file=self.file, field=joined_key(path, "device"))
        if self.preset is None:
            # (a node holds dpn devices, or, all ranks on node 0, at least the table's)
            self._check_file_nodes(rpd * (dpn or int(cols["device"].max()) + 1), bool(dpn),
                                   whose)
        # docs/TOPOLOGY.md §1: a logical core covers the TPBs lc * lnc_size .. + lnc_size - 1
        # of its device, tpb the first (until 2026-12-05 not read; checked once the row's
        # logical core is its rank's, so a row moved to another core is named by its
        # logical_core, and before the s-engine, which is read from the tpb)
        off = np.flatnonzero(cols["tpb"] != cols["logical_core"] * self.lnc_size)
        if off.size:
            path, p = rows[int(off[0])]
            raise SimulationError(f"rank {p.rank}: tpb should be logical_core {p.core} x "
                                  f"lnc_size {self.lnc_size} = {p.core * self.lnc_size}, the "
                                  f"first TPB of its logical core, not {p.tpb} "
                                  "(docs/TOPOLOGY.md §1)",
                                  file=self.file, field=joined_key(path, "tpb"))
        self._refuse_misplaced(rows, cols, {"sengine": cols["tpb"] // tps,
                                            "die": cols["sengine"] // spd}, shape, whose)
        if rids is not None:
            # (every device index is one of the preset's now: checked above)
            wrong = np.flatnonzero(np.asarray(rids, np.int64)[cols["device"]]
                                   != cols["routing_id"])
            if wrong.size:
                path, p = rows[int(wrong[0])]
                raise SimulationError(
                    f"rank {p.rank}: routing_id should be {rids[p.index]}, the routing id of "
                    f"device {p.index}, not {p.device} (docs/TOPOLOGY.md §1; {whose})",
                    file=self.file, field=joined_key(path, "routing_id"))
            return
        of_device: dict[int, tuple[int, str]] = {}  # device index -> (routing id, row)
        device_of: dict[int, tuple[int, str]] = {}  # routing id -> (device index, row)
        for path, p in rows:
            rid, at = of_device.setdefault(p.index, (p.device, path))
            if rid != p.device:
                raise SimulationError(
                    f"rank {p.rank}: routing_id should be {rid}, device {p.index}'s at {at}, "
                    f"not {p.device} (a device has one routing id, on every node: "
                    "docs/TOPOLOGY.md §2 routing_ids)", file=self.file,
                    field=joined_key(path, "routing_id"))
            dev, at = device_of.setdefault(p.device, (p.index, path))
            if dev != p.index:
                raise SimulationError(
                    f"rank {p.rank}: routing_id {p.device} of device {p.index} is device "
                    f"{dev}'s at {at} (each device has its own: docs/TOPOLOGY.md §2 "
                    "routing_ids)", file=self.file, field=joined_key(path, "routing_id"))

    def _recorded(self) -> tuple[int, int, int, int]:
        """The shape (ranks a device, devices a node, TPBs an s-engine, s-engines a die) of
        the platform the manifest records whole (a topology file's that is not exactly a
        preset: FORMATS §1.1), its values held to what ``lower`` loads (docs/TOPOLOGY.md §2:
        at most 64 devices a node, 16 cores a device, the lnc size dividing them, a routing
        id 0..63 per device, each its own), else a :class:`SimulationError` naming the key."""
        dpn, dies, spd, tps, rids = self._recorded_shape

        def err(key: str, why: str) -> SimulationError:
            return SimulationError(f"{key} {why} (docs/TOPOLOGY.md §2: lower loads no such "
                                   "platform)", file=self.file, field=key)
        if not 1 <= dpn <= MAX_DEVICES_PER_NODE:
            raise err("topology.devices_per_node", f"is {dpn}: a node holds 1 to "
                      f"{MAX_DEVICES_PER_NODE} devices")
        for key, val in (("dies", dies), ("sengines_per_die", spd), ("tpbs_per_sengine", tps)):
            if val < 1:
                raise err(f"topology.device.{key}", f"is {val}: a count of at least 1")
        tpbs = dies * spd * tps
        if self.lnc_size < 1:  # (a hand-edited one; lower writes a size of its platform)
            raise err("topology.lnc_size", f"is {self.lnc_size}: an LNC size is at least 1")
        if tpbs > MAX_CORES_PER_DEVICE or tpbs % self.lnc_size:
            raise err("topology.device", f"holds {dies} x {spd} x {tps} = {tpbs} cores: at "
                      f"most {MAX_CORES_PER_DEVICE}, a multiple of lnc_size {self.lnc_size}")
        if len(rids) != dpn:
            raise err("topology.routing_ids", f"lists {counted(len(rids), 'routing id')}: one "
                      f"for each of the {dpn} devices (topology.devices_per_node)")
        for i, rid in enumerate(rids):
            if not 0 <= rid <= CAYMAN_ID_MASK or rid in rids[:i]:
                raise err(f"topology.routing_ids[{i}]", f"is {rid}: " + (
                    f"device {rids.index(rid)}'s too (each device has its own)"
                    if 0 <= rid <= CAYMAN_ID_MASK else f"outside 0..{CAYMAN_ID_MASK}"))
        return tpbs // self.lnc_size, dpn, tps, spd

    def unlinked_devices(self, group) -> tuple[int, int, int] | None:
        """``(node, a, b)``: two device indices of one node that ranks of ``group`` sit on and
        that no chain of the recorded ``topology.links`` joins, the first such pair in the
        group's order (as ``lower`` finds it: ``Topology.unlinked_devices``); None when each
        node's devices are joined, or the manifest records no links (a preset's, always
        joined, or an output written before 2026-12-06 morning: its links are not known)."""
        if self.links is None or self._recorded_shape is None:
            return None
        if self._components is None:
            dpn = self._recorded_shape[0]
            nb: dict[int, dict[int, int]] = {}
            for a, port, b in self.links:  # (link_components reads who neighbours whom:
                nb.setdefault(a, {})[b] = port  # the reverse direction's port unused)
                nb.setdefault(b, {})[a] = port
            self._components = link_components(dpn, nb)
        return first_unlinked(((self.places[r].node, self.places[r].index) for r in group),
                              self._components)

    def _refuse_misplaced(self, rows, cols: dict[str, np.ndarray], want: dict[str, np.ndarray],
                          shape: tuple[int, int | None, int, int], whose: str) -> None:
        """The first row (and its first key of ``want``, in order) whose value is not the
        one ``want`` gives, as a :class:`SimulationError` naming the row's key and its rule
        (:meth:`_check_places`)."""
        rpd, dpn, tps, spd = shape
        bad = np.zeros(cols["rank"].size, bool)
        for key in want:
            bad |= cols[key] != want[key]
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            path, p = rows[i]
            key = next(k for k in want if cols[k][i] != want[k][i])
            r, rpn = p.rank, rpd * (dpn or 0)
            ranks_a_device = f"({counted(rpd, 'rank')} a device)"
            why = {"node": f"{r} // {rpn} ({counted(dpn or 0, 'device')} of "
                           f"{counted(rpd, 'rank')} a node)" if dpn else
                   f"no count of devices a node (1 to {MAX_DEVICES_PER_NODE}) puts device "
                   f"{p.index}'s rank {r} there",
                   "device": (f"{r} % {rpn} // {rpd}" if dpn else f"{r} // {rpd}")
                   + f" {ranks_a_device}",
                   "logical_core": f"{r} % {rpd} {ranks_a_device}",
                   "sengine": f"tpb {p.tpb} // {tps} ({counted(tps, 'TPB')} an s-engine)",
                   "die": f"sengine {p.sengine} // {spd} ({counted(spd, 's-engine')} a "
                          "die)"}[key]
            rule = ("sengine = tpb // tpbs_per_sengine" if key == "sengine" else
                    "die = sengine // sengines_per_die" if key == "die" else
                    "rank = node x ranks_per_node + device x ranks_per_device + logical_core")
            raise SimulationError(
                f"rank {r}: {key} should be {int(want[key][i])}, {why}, not {int(cols[key][i])} "
                f"(docs/TOPOLOGY.md §1: {rule}; {whose})", file=self.file,
                field=joined_key(path, key))

    # ------------------------------------------------------------------
    def region(self, index: int) -> Region:
        return self.regions[index]

    def var_region(self, subgraph: str, var_id: int) -> Region:
        try:
            return self._by_var[(subgraph, var_id)]
        except KeyError:
            raise SimulationError(f"var {var_id} of {escape_controls(subgraph)} is not in the "
                                  "memory map",
                                  file=self.file) from None

    def named(self, kind: str) -> Region | None:
        """The first region of ``kind`` in ``memory.regions``, or None: from an index built
        once per ``regions`` (called per trigger: a scan made simulating cost triggers x
        regions), rebuilt when ``regions`` is replaced or changes length."""
        regions = self.regions
        cache = self.__dict__.get("_by_kind")
        if cache is None or cache[0] is not regions or cache[1] != len(regions):
            by_kind: dict[str, Region] = {}
            for r in regions:
                by_kind.setdefault(r.kind, r)
            cache = self._by_kind = (regions, len(regions), by_kind)
        try:
            return cache[2].get(kind)
        except TypeError:  # an unhashable kind names no region
            return None

    def core_base(self, rank: int) -> int:
        return self.places[rank].core * CORE_WINDOW

    def storage_address(self, region: Region, soff: int) -> int:
        """Window-relative address of storage offset ``soff`` of ``region`` (for messages)."""
        if region.kind == "sbuf":
            p, q = divmod(soff, region.size) if region.size else (0, 0)
            return SBUF_BASE + p * self.stride + region.offset + q
        return DRAM_BASE + region.offset + soff

    # ------------------------------------------------------------------
    def _target(self, issuer: int, addr: np.ndarray, core: np.ndarray):
        """Target rank of addresses issued by ``issuer``; error codes for the routing part."""
        me = self.places[issuer]
        err = np.zeros(addr.size, np.int64)
        err[(addr >> np.uint64(55)) != 0] = E_HIGH
        valid = ((addr >> np.uint64(54)) & np.uint64(1)).astype(bool)
        cay = ((addr >> np.uint64(CAYMAN_ID_SHIFT)) & np.uint64(CAYMAN_ID_MASK)).astype(np.int64)
        err[(err == 0) & ~valid & (cay != 0)] = E_CAYMAN
        err[(err == 0) & valid & (cay == me.device)] = E_SELF
        device = np.where(valid, cay, me.device)
        inside = core <= self.max_core
        trank = np.full(addr.size, -1, np.int64)
        trank[inside] = self._core_table[self._node_row[me.node], device[inside],
                                         core[inside]]
        err[(err == 0) & (trank < 0)] = E_CORE
        return trank, err

    def resolve_data(self, issuer: int, addr: np.ndarray, nbytes: np.ndarray):
        """(target rank, region index, storage offset, error code) of data addresses."""
        addr = np.asarray(addr, dtype=np.uint64)
        nbytes = np.asarray(nbytes, dtype=np.int64)
        local = (addr & np.uint64(LOCAL_MASK)).astype(np.int64)
        core = local >> 36
        w = local & (CORE_WINDOW - 1)
        trank, err = self._target(issuer, addr, core)
        err[(err == 0) & (((addr >> np.uint64(DIE_BIT)) & np.uint64(1)) != 0)] = E_DIE
        reg = np.full(addr.size, -1, np.int64)
        soff = np.zeros(addr.size, np.int64)
        # DRAM window
        dm = (w >= DRAM_BASE) & (w < SBUF_BASE)
        if dm.any() and self._d_start.size:
            x = w[dm] - DRAM_BASE
            i = np.searchsorted(self._d_start, x, side="right") - 1
            ok = (i >= 0)
            ic = np.maximum(i, 0)
            ok &= x < self._d_end[ic]
            r = np.where(ok, self._d_idx[ic], -1)
            past = ok & (x + nbytes[dm] > self._d_end[ic])
            reg[dm] = r
            soff[dm] = np.where(ok, x - self._d_start[ic], 0)
            e = err[dm]
            e[(e == 0) & past] = E_PAST
            err[dm] = e
        sm = w >= SBUF_BASE
        if sm.any() and self._s_start.size and self.stride:
            x = w[sm] - SBUF_BASE
            p = x // self.stride
            q = x % self.stride
            i = np.searchsorted(self._s_start, q, side="right") - 1
            ic = np.maximum(i, 0)
            ok = (i >= 0) & (q < self._s_end[ic]) & (p < self._s_parts[ic])
            past = ok & (q + nbytes[sm] > self._s_end[ic])
            reg[sm] = np.where(ok, self._s_idx[ic], -1)
            soff[sm] = np.where(ok, p * self._s_size[ic] + q - self._s_start[ic], 0)
            e = err[sm]
            e[(e == 0) & past] = E_PAST
            err[sm] = e
        err[(err == 0) & (reg < 0)] = E_REGION
        return trank, reg, soff, err

    def resolve_sema(self, issuer: int, addr: np.ndarray):
        """(target rank, window, semaphore id, error code) of EVT_SEM addresses."""
        addr = np.asarray(addr, dtype=np.uint64)
        local = (addr & np.uint64((1 << 48) - 1)).astype(np.int64)
        die = (local >> DIE_BIT) & 1
        rest = local & ((1 << DIE_BIT) - 1)
        off = rest - EVT_SEM_BASE
        sp_lo = np.where(off >= 0, off >> TOPSP_STRIDE_SHIFT, -1)
        woff = off & ((1 << TOPSP_STRIDE_SHIFT) - 1)
        bad = (off < 0) | (sp_lo > 7) | (woff < EVT_SEM_READ) | (
            woff >= EVT_SEM_DEC + EVT_SEM_STRIDE * SEMAPHORES_PER_CORE)
        widx = np.clip((woff - EVT_SEM_READ) // 0x400, 0, 3)
        window = np.array(WINDOWS, np.int64)[widx]
        rel = woff - window
        bad |= (rel % EVT_SEM_STRIDE != 0) | (rel >= EVT_SEM_STRIDE * SEMAPHORES_PER_CORE)
        sem = rel // EVT_SEM_STRIDE
        core = np.where(bad, 0, sp_lo + 8 * die)
        trank, err = self._target(issuer, addr, core)
        err[(err == 0) & bad] = E_SEMA
        return trank, np.where(bad, 0, window), np.where(bad, 0, sem), err
