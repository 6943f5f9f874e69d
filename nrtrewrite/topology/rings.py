"""Rings per channel (``enc_ring``) and kangaring paths (``enc_kangaring``).

The runtime re-derives the device ring order from the physical MLA topology
(``nccl_setup_alg_ring_info``, seed 001 §1) with a deadlock-free rank sort
(``get_sorted_ranks``) and fills ``enc_alg_metaring.ring_ranks[ch]``; kangaring orders go to
``kangaring_ranks[ch].logical_path`` (``nccl_setup_alg_kangaring_info``, whose fill math the
seeds leave OPEN).  docs/TOPOLOGY.md "Rings" and "Kangaring paths" document what this module
builds and what it guarantees; in short:

* Candidate ring ``k`` walks the platform's directed device cycle ``k % V`` (V = 4 on the
  4x4 torus: the two edge-disjoint Hamiltonian cycles H0, H1, then H0 and H1 reversed), so
  four channels put traffic on every directed device link exactly once; channels take the
  distinct candidates first and repeat (``duplicate``) only when none is left.
* Within a node a ring visits every group rank of a device before leaving it (same-device
  hops first), moves between devices over links (a DFS with backtracking when the group's
  devices are not consecutive on the canonical cycle), and uses a routed C2C hop only when
  no link-only cycle exists; nodes are chained in node order, so a ring over ``k > 1``
  nodes has exactly ``k`` network hops.
* Deadlock freedom between concurrent groups: the device order of a channel is a function
  of the set of devices only, and when that order is the canonical cycle's restriction (the
  common case: whole nodes, rows, one-rank-per-device groups) every group sees the devices
  it shares with any other group in the same cyclic order and direction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import ceil

from nrtrewrite.codes import EdgeLocality
from nrtrewrite.errors import LimitError, SelectionError, ValidationError
from nrtrewrite.topology.model import Topology, hamiltonian_cycles

#: NEC_MAX_CHANNELS (nec.h).
NEC_MAX_CHANNELS = 32
#: NEC_KANGARING_MAX_NUM_RANKS in the public nec.h; the seed's 2.31 struct has 256 entries.
KANGARING_LOGICAL_PATH_LEN = 256
#: Budget of DFS expansions when searching a link-only device cycle for a group.
_DFS_BUDGET = 20_000


@dataclass(frozen=True)
class EncRing:
    """``enc_ring`` (seed 000 §2.3): one rank's view of one ring channel."""

    prev: int
    next: int
    user_ranks: tuple[int, ...]
    duplicate: bool = False


# -- device order ---------------------------------------------------------------------------

def _base_variants(topo: Topology) -> list[tuple[tuple[int, ...], bool]]:
    """The directed device cycles channels walk: (forward cycle, reversed?) per variant."""
    cycles = topo.device_cycles or (tuple(range(topo.devices_per_node)),)
    return [(c, False) for c in cycles] + [(c, True) for c in cycles]


def _linked_cycle(topo: Topology, devs: tuple[int, ...]) -> bool:
    n = len(devs)
    return n <= 1 or all(topo.linked(devs[i], devs[(i + 1) % n]) for i in range(n)
                         if n > 2 or i == 0)


def _dfs_cycle(topo: Topology, devs: list[int], pos: dict[int, int],
               length: int) -> tuple[int, ...] | None:
    """A Hamiltonian cycle over ``devs`` using device links only, by DFS with backtracking.

    Neighbours are tried in order of their forward distance along the canonical cycle, so the
    result follows the canonical direction wherever it can; deterministic and bounded.
    """
    n = len(devs)
    members = set(devs)
    start = devs[0]

    def order(cur: int) -> list[int]:
        nb = [d for d in topo.platform.links.get(cur, {}) if d in members]
        return sorted(nb, key=lambda d: ((pos[d] - pos[cur]) % length, d))

    return next(hamiltonian_cycles(start, n, order, _DFS_BUDGET), None)


def device_order(topo: Topology, devices, cycle: tuple[int, ...]) -> tuple[int, ...]:
    """Cyclic visiting order of ``devices`` (of one node) along the canonical ``cycle``.

    The restriction of ``cycle`` to ``devices`` when consecutive devices are all linked;
    otherwise a link-only Hamiltonian cycle found by DFS; otherwise the restriction (which
    then contains routed C2C hops).
    """
    key = ("device_order", tuple(sorted(devices)), cycle)
    hit = topo._cache.get(key)
    if hit is not None:
        return hit
    pos = {d: i for i, d in enumerate(cycle)}
    for d in devices:
        pos.setdefault(d, len(pos))  # devices missing from a partial cycle go last
    devs = sorted(set(devices), key=lambda d: pos[d])
    out = tuple(devs)
    if not _linked_cycle(topo, out):
        found = _dfs_cycle(topo, devs, pos, len(pos))
        if found is not None:
            out = found
    topo._cache[key] = out
    return out


# -- rings ------------------------------------------------------------------------------------

def _check_group(topo: Topology, group) -> tuple[int, ...]:
    group = tuple(group)
    if not group:
        raise ValidationError("empty replica group")
    if len(set(group)) != len(group):
        dup = next(r for r in group if group.count(r) > 1)
        raise ValidationError(f"rank {dup} appears twice in replica group", rank=dup)
    for r in group:
        topo.info(r)
    return group


def _check_channels(n_channels: int) -> None:
    if not 1 <= n_channels <= NEC_MAX_CHANNELS:
        raise LimitError(f"channel count {n_channels} outside 1..{NEC_MAX_CHANNELS} "
                         "(NEC_MAX_CHANNELS)", field="channel_n")


def _layout(topo: Topology, group: tuple[int, ...]) -> dict[int, dict[int, list[int]]]:
    """node -> device -> group ranks on it (ascending logical core)."""
    out: dict[int, dict[int, list[int]]] = {}
    for r in group:
        i = topo.info(r)
        out.setdefault(i.node, {}).setdefault(i.device, []).append(r)
    for devs in out.values():
        for ranks in devs.values():
            ranks.sort()
    return out


def _rotate_to(order: list[int], first: int) -> tuple[int, ...]:
    i = order.index(first)
    return tuple(order[i:] + order[:i])


def ring_orders(topo: Topology, group, n_channels: int) -> list[tuple[int, ...] | None]:
    """One rank order (a Hamiltonian cycle over ``group``) per channel.

    ``None`` marks an empty channel (``prev == -1``, the runtime's ``compose_empty`` channel,
    seed 001 §3): only when the group has one rank, which has no peer to exchange with.
    Every order starts at ``min(group)``; order[i+1] is the
    successor of order[i] and order[0] the successor of order[-1].  Channels get distinct
    rings while there are any; later channels repeat earlier ones (see
    :func:`duplicate_flags`).  Memoised per (group, channel count).
    """
    group = tuple(group)
    return list(topo.cached(("ring_orders", group, n_channels),
                            lambda: _ring_orders(topo, group, n_channels)))


def _ring_orders(topo: Topology, group: tuple[int, ...],
                 n_channels: int) -> tuple[tuple[int, ...] | None, ...]:
    group = _check_group(topo, group)
    _check_channels(n_channels)
    if len(group) == 1:
        return (None,) * n_channels
    layout = _layout(topo, group)
    nodes = sorted(layout)
    variants = _base_variants(topo)
    nvar = len(variants)
    multi = len(nodes) > 1
    first = min(group)

    def candidate(k: int, rounds: int) -> tuple[int, ...]:
        cycle, reverse = variants[k % nvar]
        chain: list[int] = []
        for node in nodes:
            devs = list(device_order(topo, layout[node], cycle))
            if multi and len(devs) > 1:
                # Open the node's device cycle at a channel-dependent device so that the
                # network hop (the node's exit) moves between devices from channel to channel.
                stride = max(1, len(devs) // rounds)
                rot = ((k // nvar) * stride) % len(devs)
                devs = devs[rot:] + devs[:rot]
            for d in devs:
                chain.extend(layout[node][d])
        if reverse:
            chain.reverse()
        return _rotate_to(chain, first)

    # Distinct rings first: candidate k walks variant k % nvar; a candidate repeating an
    # earlier directed cycle is skipped, and only once every distinct ring is in use do
    # channels repeat (and get enc_ring.duplicate).
    distinct: list[tuple[int, ...]] = []
    seen: set[frozenset[tuple[int, int]]] = set()

    def take(m: int) -> None:
        """The candidates of a count of ``m`` channels (their rotation stride is m's)."""
        rounds = ceil(m / nvar)
        for k in range(max(m, nvar)):
            order = candidate(k, rounds)
            succ = successor_pairs(order)
            if succ not in seen:
                seen.add(succ)
                distinct.append(order)

    take(n_channels)
    if multi:
        # The rotation stride depends on the count, so another count's candidates may hold
        # rings this count's do not: while channels would repeat a ring, take those of every
        # count in turn.  So a group has one set of distinct rings whatever the count, and
        # n channels repeat none while n <= its size (distinct_ring_count is min(n, size):
        # the channel rule's cap, docs/SELECTION.md §7, never leaves a channel repeating).
        for m in range(1, NEC_MAX_CHANNELS + 1):
            if len(distinct) >= n_channels:
                break
            take(m)
    return tuple(distinct[c % len(distinct)] for c in range(n_channels))


def successor_pairs(order: tuple[int, ...]) -> frozenset[tuple[int, int]]:
    """The directed cycle of the ring ``order``: its set of ``(rank, successor)`` hops,
    ``(order[i], order[i + 1])`` and ``(order[-1], order[0])``.  Two orders are the same
    directed ring (whichever rank they start at) when their pairs are equal, and a ring's
    reverse is ``successor_pairs(order[::-1])`` (docs/TOPOLOGY.md §3 steps 5 and 6)."""
    n = len(order)
    return frozenset((order[i], order[(i + 1) % n]) for i in range(n))


def duplicate_flags(orders: list[tuple[int, ...] | None]) -> list[bool]:
    """``enc_ring.duplicate`` per channel: the same directed cycle as an earlier channel."""
    seen: set[frozenset[tuple[int, int]]] = set()
    flags = []
    for order in orders:
        if order is None:
            flags.append(False)
            continue
        succ = successor_pairs(order)
        flags.append(succ in seen)
        seen.add(succ)
    return flags


def distinct_ring_count(topo: Topology, group, n_channels: int) -> int:
    """How many of the ``n_channels`` rings of ``group`` are distinct (not ``duplicate``);
    memoised per (group, channel count)."""
    group = tuple(group)
    return topo.cached(("distinct_rings", group, n_channels), lambda: duplicate_flags(
        ring_orders(topo, group, n_channels)).count(False))


def enc_ring(order: tuple[int, ...] | None, rank: int, *, duplicate: bool = False) -> EncRing:
    """``rank``'s ``enc_ring`` on a channel with rank order ``order``.

    ``user_ranks[0] == rank`` and ``user_ranks[i]`` is ``i`` hops ahead (NCCL ``userRanks``);
    an empty channel gives ``prev == next == -1`` and ``user_ranks == ()``.
    """
    if order is None:
        return EncRing(prev=-1, next=-1, user_ranks=(), duplicate=False)
    try:
        i = order.index(rank)
    except ValueError:
        raise ValidationError(f"rank {rank} is not on this ring", rank=rank) from None
    n = len(order)
    user = order[i:] + order[:i]
    return EncRing(prev=order[(i - 1) % n], next=order[(i + 1) % n], user_ranks=user,
                   duplicate=duplicate)


def enc_rings(orders: list[tuple[int, ...] | None], rank: int) -> list[EncRing]:
    """``rank``'s ``enc_ring`` on every channel, with ``duplicate`` filled in."""
    return [enc_ring(o, rank, duplicate=d) for o, d in zip(orders, duplicate_flags(orders))]


def hop_localities(topo: Topology, order: tuple[int, ...] | None) -> dict[EdgeLocality, int]:
    """How many hops of a ring are of each locality (for explain and tests)."""
    counts = {loc: 0 for loc in EdgeLocality}
    if order is None or len(order) < 2:
        return counts
    n = len(order)
    for i in range(n):
        counts[topo.locality(order[i], order[(i + 1) % n])] += 1
    return counts


def is_hybrid_ring(topo: Topology, group) -> bool:
    """The one-rank-per-device hybrid ring of seed 001 §1 (``is_hybrid_ring``; the ring
    leaves' ``is_hybrid_ring_op`` argument).

    ``node_n == 1 && vcore == 2 && mla_cycle_n == 2 && rank_n == 16`` with every rank on its
    own device and all ranks at the same core index of their device; the runtime then forces
    ``channel_n = 4`` (one channel per directed device Hamiltonian cycle).
    """
    group = tuple(group)
    if topo.lnc_size != 2 or len(topo.device_cycles) != 2 or len(group) != 16:
        return False
    infos = [topo.info(r) for r in group]
    if len({i.node for i in infos}) != 1:
        return False
    if len({i.device for i in infos}) != len(group):
        return False
    return len({i.logical_core for i in infos}) == 1


# -- kangaring --------------------------------------------------------------------------------

@dataclass(frozen=True)
class EncKangaring:
    """``enc_kangaring`` (seed 000 §2.3, nec.h): one rank's view of one kangaring channel.

    Peers are topological (they do not depend on the rank's role): ``peer_rmtv`` is the rank
    on the cross-die s-engine ``seng ^ 2`` at the same TPB slot; with VNC 1 ``peer_rmtv2`` is
    the other TPB of that engine and ``peer_local`` the other TPB of the rank's own engine
    (-1 with VNC 2).  A primary's ``prev``/``next`` are the neighbouring primaries and
    ``port`` the C2C port toward ``next`` (-1 when ``next`` is on the same device or only
    reachable by routing); a secondary's ``prev`` and ``next`` are its unit's primary, the one
    rank it exchanges data with, and its ``port``/``next_peer_rmtv`` are -1.
    """

    vnc: int
    logical_path: tuple[int, ...]
    prev: int
    next: int
    port: int
    peer_rmtv: int
    peer_rmtv2: int
    peer_local: int
    next_peer_rmtv: int
    is_primary: bool
    is_next_pcie: bool = False
    duplicate: bool = False
    pattern2: bool = False


@dataclass(frozen=True)
class KangaringChannel:
    """One kangaring channel: the logical path "p0 s0.. p1 s1.. ..." and every rank's view."""

    channel: int
    logical_path: tuple[int, ...]
    primaries: tuple[int, ...]  # the data-path cycle, in order
    units: tuple[tuple[int, ...], ...]  # (primary, secondaries...) in path order
    duplicate: bool
    ranks: dict[int, EncKangaring] = field(compare=False, repr=False)
    #: the composer's memo of what depends on this channel alone (compose/kangaring.py:
    #: a primary's unit tables and transfer tables); shared with the channel, never compared
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    def of(self, rank: int) -> EncKangaring:
        try:
            return self.ranks[rank]
        except KeyError:
            raise ValidationError(f"rank {rank} is not on this kangaring", rank=rank) from None


def kangaring_shape(topo: Topology, group) -> tuple[bool, str]:
    """Can ``group`` be laid out as kangaring units?  (bool, reason); memoised per group."""
    group = tuple(group)
    return topo.cached(("kangaring_shape", group), lambda: _kangaring_shape(topo, group))


def _kangaring_shape(topo: Topology, group: tuple[int, ...]) -> tuple[bool, str]:
    p = topo.platform
    if not p.kangaring or p.device.dies != 2 or p.device.sengines != 4:
        return False, (f"{topo.platform_title} has no kangaring (needs 2 dies x 2 s-engines = "
                       "KANGARING_NUM_SENG_PER_DEV 4 per MLA)")
    layout = _layout(topo, group)
    if len(layout) != 1:
        return False, f"KANGARING is intra-node only (group spans {len(layout)} nodes)"
    node = next(iter(layout))
    for d, ranks in sorted(layout[node].items()):
        if len(ranks) != topo.ranks_per_device:
            return False, (f"device {d} of node {node} has {len(ranks)} of its "
                           f"{topo.ranks_per_device} ranks in the group; KangaRing needs every "
                           "rank of each device it touches")
    if topo.lnc_size > p.device.tpbs_per_sengine:
        return False, f"lnc_size {topo.lnc_size} spans more than one s-engine"
    if p.device.tpbs_per_sengine % topo.lnc_size:
        return False, (f"lnc_size {topo.lnc_size} does not divide the "
                       f"{p.device.tpbs_per_sengine} TPBs of an s-engine: a logical core would "
                       "span two s-engines")
    per_seng = p.device.tpbs_per_sengine // topo.lnc_size
    if per_seng > 2:
        return False, (f"{per_seng} ranks per s-engine; a kangaring unit holds 1 or 2 of each "
                       "engine (a rank and at most KANGARING_MAX_SECONDARIES 3 peers: "
                       "peer_rmtv, peer_rmtv2, peer_local)")
    return True, f"{len(layout[node])} full device(s), vnc {topo.lnc_size}"


def _units(topo: Topology, node: int, device: int) -> list[tuple[int, ...]]:
    """The two kangaring units of a device: all ranks on s-engines {k, k^2}, k = 0, 1.

    Member order: VNC 2 -> (S_k, S_k^2); VNC 1 -> (S_k t0, S_k^2 t0, S_k^2 t1, S_k t1), i.e.
    self, peer_rmtv, peer_rmtv2, peer_local of the first member.
    """
    dev = topo.platform.device
    per_seng = dev.tpbs_per_sengine // topo.lnc_size  # ranks per s-engine

    def rank(seng: int, slot: int) -> int:
        tpb = seng * dev.tpbs_per_sengine + slot * topo.lnc_size
        return topo.rank_at(node, device, tpb // topo.lnc_size)

    units = []
    for k in (0, 1):
        if per_seng == 1:
            units.append((rank(k, 0), rank(k ^ 2, 0)))
        else:
            units.append((rank(k, 0), rank(k ^ 2, 0), rank(k ^ 2, 1), rank(k, 1)))
    return units


def _kangaring_peers(topo: Topology, r: int) -> tuple[int, int, int]:
    dev = topo.platform.device
    info = topo.info(r)
    per_seng = dev.tpbs_per_sengine // topo.lnc_size
    rmtv = topo.cross_die_peer(r)
    if per_seng == 1 or rmtv is None:
        return (rmtv if rmtv is not None else -1), -1, -1
    slot = (info.tpb % dev.tpbs_per_sengine) // topo.lnc_size
    other = 1 - slot

    def at(seng: int, s: int) -> int:
        tpb = seng * dev.tpbs_per_sengine + s * topo.lnc_size
        return topo.rank_at(info.node, info.device, tpb // topo.lnc_size)

    return rmtv, at(info.sengine ^ 2, other), at(info.sengine, other)


def kangaring_identity(units: tuple[tuple[int, ...], ...]) -> tuple:
    """What makes two kangaring channels the same (``duplicate``, docs/TOPOLOGY.md): the
    directed cycle of their primaries (each unit's first rank), whichever primary the
    path starts at, as for rings (:func:`duplicate_flags`), and the same units."""
    return successor_pairs(tuple(u[0] for u in units)), tuple(sorted(units))


def kangaring_paths(topo: Topology, group, n_channels: int) -> list[KangaringChannel]:
    """The kangaring channels of ``group`` (design: docs/TOPOLOGY.md "Kangaring paths").

    Channel ``c`` walks the group's devices in the ring order of channel ``c`` (same device
    cycles as :func:`ring_orders`), visits unit 0 then unit 1 of each device (reversed on the
    reversed cycles), and makes member ``c % unit_size`` of every unit its primary, so over
    the first four channels each rank of a VNC-2 unit is primary twice and each rank of a
    VNC-1 unit once.  ``logical_path`` lists every unit as primary then secondaries.
    Memoised per (group, channel count): the channels are shared, never to be mutated.
    """
    group = tuple(group)
    return list(topo.cached(("kangaring_paths", group, n_channels),
                            lambda: _kangaring_paths(topo, group, n_channels)))


def _kangaring_paths(topo: Topology, group: tuple[int, ...],
                     n_channels: int) -> tuple[KangaringChannel, ...]:
    group = _check_group(topo, group)
    _check_channels(n_channels)
    ok, why = kangaring_shape(topo, group)
    if not ok:
        raise SelectionError(f"enc_can_post_kangaring_operation: {why}")
    if len(group) > KANGARING_LOGICAL_PATH_LEN:
        raise LimitError(f"kangaring group of {len(group)} ranks exceeds logical_path"
                         f"[{KANGARING_LOGICAL_PATH_LEN}]", field="logical_path")
    layout = _layout(topo, group)
    node = next(iter(layout))
    variants = _base_variants(topo)
    seen: set[tuple] = set()
    out = []
    for c in range(n_channels):
        cycle, reverse = variants[c % len(variants)]
        devs = device_order(topo, layout[node], cycle)
        unit_seq = [u for d in devs for u in _units(topo, node, d)]
        if reverse:
            unit_seq.reverse()
        size = len(unit_seq[0])
        p = c % size
        units = tuple((u[p], *(m for i, m in enumerate(u) if i != p)) for u in unit_seq)
        primaries = tuple(u[0] for u in units)
        path = tuple(m for u in units for m in u)
        ident = kangaring_identity(units)
        dup = ident in seen
        seen.add(ident)
        views: dict[int, EncKangaring] = {}
        n = len(primaries)
        for i, u in enumerate(units):
            prim = u[0]
            nxt, prv = primaries[(i + 1) % n], primaries[(i - 1) % n]
            pi, ni = topo.info(prim), topo.info(nxt)
            port = topo.link_port(pi.device, ni.device) if pi.device != ni.device else None
            for m in u:
                rmtv, rmtv2, local = _kangaring_peers(topo, m)
                if m == prim:
                    views[m] = EncKangaring(
                        vnc=topo.lnc_size, logical_path=path, prev=prv, next=nxt,
                        port=-1 if port is None else port, peer_rmtv=rmtv, peer_rmtv2=rmtv2,
                        peer_local=local, next_peer_rmtv=_kangaring_peers(topo, nxt)[0],
                        is_primary=True, duplicate=dup)
                else:
                    views[m] = EncKangaring(
                        vnc=topo.lnc_size, logical_path=path, prev=prim, next=prim, port=-1,
                        peer_rmtv=rmtv, peer_rmtv2=rmtv2, peer_local=local, next_peer_rmtv=-1,
                        is_primary=False, duplicate=dup)
        out.append(KangaringChannel(channel=c, logical_path=path, primaries=primaries,
                                    units=units, duplicate=dup, ranks=views))
    return tuple(out)
