"""Buffer views of a trigger on one rank, in the collective's element space.

=========  ==============  ======================  =======================
view       all-reduce      reduce-scatter          all-gather
=========  ==============  ======================  =======================
IN         src operand     src operand             src operand (own block)
OUT        dst operand     dst operand (own block) dst operand
RECV       scratch         scratch                 = OUT
GW         gateway         gateway                 gateway
=========  ==============  ======================  =======================

"Own block": element ``e`` of the op space maps to the operand only inside the
rank's block (reduce-scatter output, all-gather input).  Scratch and gateway
regions are indexed by element (``e * dsize``) from an optional byte offset.
"""

from __future__ import annotations

from nrtrewrite.codes import EncOpType
from nrtrewrite.compose.chunking import io_dtype_size
from nrtrewrite.compose.leaves import Buf
from nrtrewrite.emit.address import DRAM_BASE, SBUF_BASE, MemoryMap
from nrtrewrite.emit.buffers import BufferView
from nrtrewrite.neff.model import Operand, Trigger


def operand_view(memory: MemoryMap, trig: Trigger, operand: Operand, origin: int) -> BufferView:
    """A trigger operand (DRAM var + offset, or SBUF access pattern); element ``origin``
    is the operand's first element."""
    region = memory.var(trig.subgraph, operand.var_id)
    dsize = io_dtype_size(trig.dtype)
    if operand.ap is None:
        base = DRAM_BASE + region.offset + operand.offset
        return BufferView(dsize=dsize, origin=origin, base=base, anchor=base - origin * dsize)
    return BufferView(dsize=dsize, origin=origin, base=SBUF_BASE + region.offset, ap=operand.ap,
                      partition_stride=memory.sbuf_partition_stride, anchor=SBUF_BASE)


def region_view(memory: MemoryMap, kind: str, dsize: int, offset: int = 0,
                origin: int = 0) -> BufferView:
    """The scratch or gateway region as a linear buffer: element ``e`` at
    ``offset + (e - origin) * dsize``."""
    region = memory.named(kind)
    base = DRAM_BASE + region.offset + offset
    return BufferView(dsize=dsize, origin=origin, base=base, anchor=base)


def in_out_views(memory: MemoryMap, trig: Trigger, own: int) -> list[BufferView]:
    """IN and OUT of the rank whose own block starts at element ``own`` of the op space: the
    all-gather's IN and the reduce-scatter's OUT hold that block only (the table above)."""
    return [operand_view(memory, trig, trig.src, own if trig.op == EncOpType.ALLGATHER else 0),
            operand_view(memory, trig, trig.dst,
                         own if trig.op == EncOpType.REDUCE_SCATTER else 0)]


def standard_views(memory: MemoryMap, trig: Trigger, block: int) -> dict[Buf, BufferView]:
    """IN / OUT / RECV / GW of the rank whose index in the replica group is ``block``."""
    dsize = io_dtype_size(trig.dtype)
    per_rank = (trig.num_elements // trig.group_size if trig.op == EncOpType.REDUCE_SCATTER
                else trig.num_elements)
    views = {Buf.RECV: region_view(memory, "scratch", dsize),
             Buf.GW: region_view(memory, "gw", dsize)}
    views[Buf.IN], views[Buf.OUT] = in_out_views(memory, trig, block * per_rank)
    if trig.op == EncOpType.ALLGATHER:
        views[Buf.RECV] = views[Buf.OUT]
    return views


def view_list(views: dict[Buf, BufferView]) -> list[BufferView]:
    """The standard views as the IR's view list (index = Buf value)."""
    return [views[b] for b in (Buf.IN, Buf.OUT, Buf.RECV, Buf.GW)]


def op_elements(trig: Trigger) -> int:
    """Elements of the op space: the message (AR, RS) or the gathered output (AG)."""
    return trig.num_elements * (trig.group_size if trig.op == EncOpType.ALLGATHER else 1)
