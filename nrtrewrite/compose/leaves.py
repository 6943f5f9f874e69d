"""The step-recorder leaf vocabulary (seed 000 §3.1, seed 003 §4).

A composer produces a sequence of leaf calls; :mod:`nrtrewrite.emit` turns each
leaf call into a leg (descriptors + semaphores).  What a leaf reads, writes and
signals is declared once here, in :data:`LEAF_SPECS`, so that the emitter, the
``schedule`` command, the docs and the simulator's cross-checks agree.

Buffers (per rank, docs/DESIGN.md "Buffers"):

``IN``   the trigger's src operand;  ``OUT`` its dst operand;
``RECV`` the receive slot of a partial sum (the rank's scratch region, indexed
by element position, written once per trigger);  the *owner* of a buffer is
``SELF`` or ``NEXT`` (the ring successor of the channel).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Leaf(IntEnum):
    """enc_primitive leaves we emit; numbering is ours (docs/FORMATS.md legs.bin).  The one
    table of leaf names: ``schedule`` and ``dump`` name a leaf code by it (:func:`leaf_name`)."""

    send = 1
    recv_reduce_send = 2
    recv_reduce_copy = 3
    recv_reduce_copy_send = 4
    direct_copy_send = 5
    direct_recv_send = 6
    direct_recv = 7
    direct_copy = 8
    direct_pull = 9
    direct_reduce_send_kangaring = 10
    # the kangaring sync legs (docs/FORMATS.md §3.3): no data, a unit semaphore only
    peer_post = 11  # a secondary: +1 on its primary's kring_peer_semas.mine
    peer_wait = 12  # waits on the rank's own kring_peer_semas.mine
    mark_end = 15  # the per-channel completion wait (mark_end -> encd_dma_mark_end +
    #                proxy_end_operation, seed 003; the
    #                mesh composers' ``end_context``, seed 003 §3, is the same leg)
    # mesh and RDH legs (docs/FORMATS.md §3): enc_primitive_mesh's step recorders
    mesh_send = 16  # enc_primitive_mesh::send: one source to one or more destinations (CME)
    mesh_reduce = 17  # enc_primitive_mesh::reduce: prepare_reduce_params records (CCE)
    rdh_copy = 18  # submit_rdh_copy_transfers: a 1:1 rdh_transfer (CME)
    rdh_reduce = 19  # submit_rdh_cce_transfers -> enc_primitive_mesh::rdh_reduce (CCE)
    mesh_sync = 20  # an event's handshake / wait without data
    post_recv = 21  # posts a receive through the net proxy: no data, net_dest entries only
    mark_complete = 22  # the entry handshake: channel done / post to peers / wait for posts


def leaf_name(code: int) -> str:
    """The name of legs.bin leaf ``code`` (docs/FORMATS.md §3), ``"0x.."`` for a code that
    is not a leaf."""
    try:
        return Leaf(code).name
    except ValueError:
        return f"0x{code:x}"


#: Leaves whose leg moves (or, ``direct_recv``, consumes) one chunk position of a ring-family
#: schedule (RING, SINGLE_CYCLE_RING, KANGARING): their leg IR ``k`` is that position as a
#: rank id.  The other legs have no chunk position (their IR ``k`` is 0): the kangaring sync
#: legs, and the mesh and RDH legs, which move the element ranges their events name;
#: ``schedule`` shows the rank itself as their ``k`` (docs/CLI.md).
CHUNK_LEAVES = frozenset(int(leaf) for leaf in (
    Leaf.send, Leaf.recv_reduce_send, Leaf.recv_reduce_copy, Leaf.recv_reduce_copy_send,
    Leaf.direct_copy_send, Leaf.direct_recv_send, Leaf.direct_recv, Leaf.direct_copy,
    Leaf.direct_reduce_send_kangaring))


class Buf(IntEnum):
    """Logical buffers a leaf addresses."""

    IN = 0
    OUT = 1
    RECV = 2
    GW = 3  # gateway staging buffer for a network hop (send side)


class Owner(IntEnum):
    SELF = 0
    NEXT = 1


@dataclass(frozen=True)
class LeafSpec:
    """What one leaf call does.

    ``sources`` are read (and reduced, when ``reduce``); every destination
    receives the (reduced) stream.  ``waits`` says the leg consumes one
    data-ready count from its predecessor (a *recv* leaf); a destination owned
    by NEXT makes it a *send* leaf that signals the successor.
    """

    sources: tuple[Buf, ...]
    dests: tuple[tuple[Buf, Owner], ...]
    reduce: bool
    waits: bool

    @property
    def sends(self) -> bool:
        return any(owner == Owner.NEXT for _buf, owner in self.dests)


#: Ring leaves.  RECV receives the partials of the reduce-scatter phase; OUT is
#: where reduced / gathered chunks land.  For ALLGATHER the first send writes the
#: successor's OUT (there are no partials); the emitter maps that per op.
LEAF_SPECS: dict[Leaf, LeafSpec] = {
    Leaf.send: LeafSpec((Buf.IN,), ((Buf.RECV, Owner.NEXT),), reduce=False, waits=False),
    Leaf.recv_reduce_send: LeafSpec((Buf.RECV, Buf.IN), ((Buf.RECV, Owner.NEXT),),
                                    reduce=True, waits=True),
    Leaf.recv_reduce_copy: LeafSpec((Buf.RECV, Buf.IN), ((Buf.OUT, Owner.SELF),),
                                    reduce=True, waits=True),
    Leaf.recv_reduce_copy_send: LeafSpec((Buf.RECV, Buf.IN),
                                         ((Buf.OUT, Owner.SELF), (Buf.OUT, Owner.NEXT)),
                                         reduce=True, waits=True),
    Leaf.direct_copy_send: LeafSpec((Buf.OUT,), ((Buf.OUT, Owner.NEXT),), reduce=False,
                                    waits=False),
    Leaf.direct_recv_send: LeafSpec((Buf.OUT,), ((Buf.OUT, Owner.NEXT),), reduce=False,
                                    waits=True),
    Leaf.direct_recv: LeafSpec((), (), reduce=False, waits=True),
    Leaf.direct_copy: LeafSpec((Buf.IN,), ((Buf.OUT, Owner.SELF),), reduce=False, waits=False),
    Leaf.mark_end: LeafSpec((), (), reduce=False, waits=False),
}

#: Leaves that carry SDMA_CCETYPE + reduction_type_t (seed 000 §3.1 "REDUCE steps").
REDUCE_LEAVES = frozenset(leaf for leaf, spec in LEAF_SPECS.items() if spec.reduce)
