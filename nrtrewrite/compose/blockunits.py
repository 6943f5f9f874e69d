"""Entries composed once in block units and rescaled to each trigger (the MESH and RDH
templates).

A MESH or RDH entry of one rank depends on the trigger's size only through element
coordinates: the ``start`` / ``stop`` of its rows and the origins and addresses of its views.
Which rows there are, their peers, semaphores, waits and view indexes follow from the
replica group, the op, the element size and the rank -- provided that

* every block is non-empty: the composers drop the rows and events of empty ranges, and a copy
  groups its destinations by element range, so ranges must be empty or equal in block units
  exactly when they are in elements;
* no copy reaches ``UINT32_MAX`` bytes (``check_copy_params`` raises).

Both hold when the trigger's *block edges* (element ``edges[j]`` starts block ``j``, the last
edge ends the op space) are strictly increasing and the op space is below ``UINT32_MAX``
bytes (:func:`block_edges`).  Then the entry is composed once per (topology, group, op,
element size, rank) with block ``j`` standing for the element range ``[j, j + 1)`` (every
range the composers build is a run of whole blocks, but for the pages of a MESH reduce, which
``mesh._rescaled_mesh`` repeats per page of the trigger's block), memoised on the topology of
the run (``Topology.cached``: shared by the triggers of one lowering, gone with the plan), and
each trigger's rows are the template's with every element coordinate ``u`` replaced by
``edges[u]`` (:func:`rescaled`).  Views are recorded as recipes whose origins are block
coordinates too, and built per trigger.  A trigger outside these conditions is composed
directly in its own elements (the same composer, the same errors).  The memo holds rows and
recipes whose size depends on the group, never on the message.
"""

from __future__ import annotations

import numpy as np

from nrtrewrite.compose import ir as IR
from nrtrewrite.compose.params import UINT32_MAX


def block_edges(edges: np.ndarray, total: int, dsize: int) -> np.ndarray | None:
    """``edges`` if an entry composed in block units rescales to them exactly: strictly
    increasing from 0 to the op space's ``total`` elements, below ``UINT32_MAX`` bytes in all;
    else None (compose the trigger directly)."""
    if (int(edges[0]) != 0 or int(edges[-1]) != total or total * dsize >= UINT32_MAX
            or not bool((edges[1:] > edges[:-1]).all())):
        return None
    return edges


def rescaled(template: np.ndarray, edges: np.ndarray, index: np.ndarray | None = None
             ) -> np.ndarray:
    """The rows of ``template`` (those of ``index``, in that order, if given) with ``start``
    and ``stop`` taken from block coordinates to elements (``edges[u]``), numbered by
    ``step`` from 0.  A fresh array: the template is shared."""
    rows = IR.take(template, np.arange(template.size) if index is None else index)
    rows["start"] = np.take(edges, rows["start"])
    rows["stop"] = np.take(edges, rows["stop"])
    rows["step"] = np.arange(rows.size)
    return rows
