"""The leg IR: what every composer hands to the one emitter.

A composer (ring, mesh, RDH, kangaring, ...) describes one SPAD entry of one
rank as a numpy array of :data:`LEG_IR_DTYPE` rows, one per leaf call, in
channel-program order (channel by channel).  Each row says:

* which element range of the collective it moves (``start``, ``stop``);
* its sources and destinations as (view, peer) pairs: ``view`` indexes the
  entry's buffer views (:class:`nrtrewrite.emit.buffers.BufferView`), ``peer``
  indexes the entry's peer table (0 is the rank itself);
* whether the sources are reduced (CCE) and the ``reduction_type_t``;
* the semaphores it waits on (``wait_ge_and_dec``) before it runs and the ones it
  increments after (``inc``), on itself or on a peer;
* for a leg whose input arrives through the net proxy, the peer it comes from,
  the view it lands in (the receive FIFO entries) and the semaphore the proxy
  increments when it has landed (``net_sem``; 0 = the channel's ``recv_sema``);
* the gateway view its network-bound destinations are staged in (``gw_view``;
  :data:`NO_VIEW` = the entry's gateway view): a composer that sends the same
  elements over the network more than once in one entry gives each send its own
  gateway view, so the proxy never reads bytes a later leg overwrites;
* ``keep``: a row without elements that must still be emitted (a sync leg that
  only waits and increments; rows with an empty element range are dropped
  otherwise).  Such a row has no destination and no network receive: the emitter
  refuses one that has (it would be a 0-byte transfer or FIFO entry).

The emitter (:func:`nrtrewrite.emit.legs.emit_entries`) adds what every leg does
anyway: the local ``dma_compl_sema`` increment and the channel's closing
``mark_end``; it turns destinations and increments aimed at a peer across the
network into gateway writes, transmit FIFO entries and a ``send_sema``
increment.
"""

from __future__ import annotations

import numpy as np

MAX_SRC = 8
MAX_DST = 8
MAX_WAIT = 2
MAX_INC = 8
NO_NET = -1
NO_VIEW = 0xFFFF
#: Entries of an entry's peer table (the rank itself and its peers): the ``*_peer`` columns
#: below are u8.  Only MESH numbers every rank of its group as a peer; its predicate refuses
#: a larger group (select.enc_can_post_mesh_operation), so no column wraps.
MAX_PEERS = 256

LEG_IR_DTYPE = np.dtype([
    ("channel", "u1"), ("leaf", "u1"), ("half", "u1"), ("phase", "u1"),
    ("group", "<i4"), ("step", "<i4"), ("k", "<i4"),
    ("start", "<i8"), ("stop", "<i8"),
    ("n_src", "u1"), ("src_view", "<u2", (MAX_SRC,)), ("src_peer", "u1", (MAX_SRC,)),
    ("n_dst", "u1"), ("dst_view", "<u2", (MAX_DST,)), ("dst_peer", "u1", (MAX_DST,)),
    ("reduce", "u1"), ("reduction_type", "u1"),
    ("n_wait", "u1"), ("wait_sem", "u1", (MAX_WAIT,)), ("wait_val", "<u4", (MAX_WAIT,)),
    ("n_inc", "u1"), ("inc_peer", "u1", (MAX_INC,)), ("inc_sem", "u1", (MAX_INC,)),
    ("inc_val", "<u4", (MAX_INC,)),
    ("net_src_peer", "<i2"), ("net_view", "<u2"), ("net_sem", "u1"),
    ("gw_view", "<u2"), ("keep", "u1"),
])


#: a leg IR row as one opaque item (copies of these are plain memory copies)
_ITEM = np.dtype((np.void, LEG_IR_DTYPE.itemsize))


def empty(n: int) -> np.ndarray:
    ir = np.zeros(n, LEG_IR_DTYPE)
    ir["net_src_peer"] = NO_NET
    ir["gw_view"] = NO_VIEW
    return ir


def _bytes(rows: np.ndarray) -> np.ndarray:
    """IR rows as an (n, itemsize) byte matrix (a view; a copy if not contiguous)."""
    return np.ascontiguousarray(rows).view(np.uint8).reshape(rows.size, LEG_IR_DTYPE.itemsize)


def concat(parts: list[np.ndarray]) -> np.ndarray:
    """Rows of several IR arrays, one after the other.  Joined as opaque items (a void view):
    numpy copies a structured array field by field (``np.concatenate`` also promotes the
    dtype per call), some thirty times slower than the bytes of these packed rows."""
    if not parts:
        return np.empty(0, LEG_IR_DTYPE)
    return np.concatenate([np.ascontiguousarray(p).view(_ITEM) for p in parts]).view(
        LEG_IR_DTYPE)


def kept(rows: np.ndarray) -> np.ndarray:
    """Which rows become legs (a boolean mask): a row with elements, or one marked ``keep``
    (a sync leg); a row whose element range is empty emits no leg (docs/DESIGN.md).  The one
    rule the emitter and ``schedule`` apply (:func:`emitted`)."""
    return (rows["stop"] > rows["start"]) | (rows["keep"] != 0)


def emitted(rows: np.ndarray) -> np.ndarray:
    """The rows of ``rows`` that become legs (:func:`kept`), in order; ``rows`` itself when
    every row does."""
    if not rows.size:
        return rows
    mask = kept(rows)
    return rows if mask.all() else take(rows, mask)


def take(rows: np.ndarray, which: np.ndarray) -> np.ndarray:
    """``rows[which]`` (indices or a boolean mask).  ``np.take`` and ``np.compress`` copy
    whole items; indexing copies a structured array field by field (see :func:`concat`),
    and even a gather of the rows' bytes is about four times slower than ``np.take``."""
    which = np.asarray(which)
    if which.dtype == np.bool_:
        return np.compress(which, rows)
    return np.take(rows, which)
