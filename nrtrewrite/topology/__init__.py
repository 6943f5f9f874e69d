"""TOPOLOGY: the rank/device/node model, ring orders per channel and kangaring paths.

Seed 000 §2 (``topology::findPath``, ``sengine_get_d2d_peer_nums``, ``enc_ring`` /
``enc_kangaring``); docs/TOPOLOGY.md.
"""

from nrtrewrite.topology.model import (
    PRESETS, DeviceSpec, Platform, RankInfo, Topology, load_topology,
)
from nrtrewrite.topology.rings import (
    NEC_MAX_CHANNELS, EncKangaring, EncRing, KangaringChannel, device_order, duplicate_flags,
    enc_ring, enc_rings, hop_localities, is_hybrid_ring, kangaring_identity, kangaring_paths,
    kangaring_shape, ring_orders,
)

__all__ = [
    "PRESETS", "DeviceSpec", "Platform", "RankInfo", "Topology", "load_topology",
    "NEC_MAX_CHANNELS", "EncKangaring", "EncRing", "KangaringChannel", "device_order",
    "duplicate_flags", "enc_ring", "enc_rings", "hop_localities", "is_hybrid_ring",
    "kangaring_identity", "kangaring_paths", "kangaring_shape", "ring_orders",
]
