"""Per-descriptor tiling (seed 000 §3.4) and the dtype rules of the CCE reduce.

``encd_get_cce_reduce_packet_size = min(sdma_data_type_size[dtype] * N,
cc_cce_reduce_prio_pkt_size[priority_class]) & ~0x1F`` and the CCE element cap
(``aws_hal_get_sdma_max_cce_elements``: 2048 on v3/v4, 1024 on v2).  The generation is
the platform's (:attr:`nrtrewrite.topology.model.Platform.hw_generation`: trn1 is
NeuronCore-v2, trn2 v3); v3 is the default of a custom platform.  See docs/DESIGN.md
"Tiling and the hardware generation".
"""

from __future__ import annotations

import numpy as np

from nrtrewrite.codes import CCE_REDUCE_DTYPES, DType
from nrtrewrite.emit.formats import BD_MAX_BYTES

#: cc_cce_reduce_prio_pkt_size per priority class (ours: no public default; the
#: largest is the 16-bit BD length limit).  Class 0 is what we use.
CC_CCE_REDUCE_PRIO_PKT_SIZE = (BD_MAX_BYTES, 16384, 4096)
DEFAULT_PRIORITY_CLASS = 0
#: aws_hal_get_sdma_max_cce_elements by hardware generation (NeuronCore version).
SDMA_MAX_CCE_ELEMENTS = {2: 1024, 3: 2048, 4: 2048}
#: The largest CCE element cap of any generation: what an output that does not record its
#: platform is held to (simulate), and what every platform was tiled at before 2026-12-01.
MAX_SDMA_CCE_ELEMENTS = max(SDMA_MAX_CCE_ELEMENTS.values())
#: The hardware generations we know the CCE element cap of.
HW_GENERATIONS = tuple(sorted(SDMA_MAX_CCE_ELEMENTS))
#: The generation of a platform that does not name one (a topology file without
#: ``platform`` or ``hw_generation``): v3, as trn2 (the default topology).
DEFAULT_HW_GENERATION = 3


def expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner index, index within owner, first position of each owner) for repeat counts:
    the tiles of legs, the runs of a stream, the pages of a block, one row each."""
    counts = np.asarray(counts, dtype=np.int64)
    first = np.cumsum(counts) - counts
    owner = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    within = np.arange(owner.size, dtype=np.int64) - first[owner] if owner.size else owner
    return owner, within, first


def cce_max_elements(hw_generation: int) -> int:
    """aws_hal_get_sdma_max_cce_elements: elements per CCE descriptor on ``hw_generation``."""
    try:
        return SDMA_MAX_CCE_ELEMENTS[hw_generation]
    except (KeyError, TypeError):
        raise ValueError(f"unknown hardware generation {hw_generation!r} (known: "
                         f"{', '.join(map(str, HW_GENERATIONS))})") from None


def packet_size(dtype_size: int, num_elements: np.ndarray, priority_class: int) -> np.ndarray:
    """min(dtype_size*N, prio_pkt_size) & ~0x1F, vectorised."""
    cap = CC_CCE_REDUCE_PRIO_PKT_SIZE[priority_class]
    return np.minimum(dtype_size * np.asarray(num_elements, dtype=np.int64), cap) & ~0x1F


def tile_elements(dtype_size: int, num_elements: np.ndarray, reduce: np.ndarray,
                  priority_class: int = DEFAULT_PRIORITY_CLASS, *,
                  hw_generation: int) -> np.ndarray:
    """Elements per tile (one packet) of each leg.

    A leg smaller than 32 bytes gets a packet size of 0 from the formula; it is
    then carried whole in one tile (it cannot exceed a BD).  Reduce legs are
    further capped by the CCE element cap of ``hw_generation`` (the platform's: no
    default, so no caller tiles for a generation it did not name).
    """
    n = np.asarray(num_elements, dtype=np.int64)
    pkt = packet_size(dtype_size, n, priority_class)
    per = np.where(pkt > 0, pkt // dtype_size, n)
    per = np.where(np.asarray(reduce, dtype=bool),
                   np.minimum(per, cce_max_elements(hw_generation)), per)
    return np.maximum(per, 1)


def cce_dtype_nibbles(dtype: DType) -> tuple[int, int, int]:
    """(in, out, accumulate) dtype nibbles of a CCE reduce (SEED-NOTES "FP32R").

    BF16/FP16/FP8 read and write their own code and accumulate in FP32R; FP32R
    data is fp32 in memory: in/out carry FP32 (0xA), accumulate FP32R (0xB).
    """
    if dtype not in CCE_REDUCE_DTYPES:
        raise ValueError(f"{dtype.name} is not CCE-reducible")
    io = DType.FP32 if dtype == DType.FP32R else dtype
    return int(io), int(io), int(DType.FP32R)


def io_code(dtype: DType) -> int:
    """The in/out dtype code of a copy or an 0xBF word (FP32R moves as FP32)."""
    return int(DType.FP32 if dtype == DType.FP32R else dtype)
