"""SERIALIZE (seed 000 §4.3): the TOP_SP cc_op SPAD table and its tp_inc_steps (the
runtime's ``encd_populate_metaring_topsp_config`` / ``encd_populate_mesh_topsp_config``;
the reporter, ``encd_get_topsp_is_leader``'s choice, is the group's lowest rank:
``lower.py`` ``leader``).

:func:`spad_ctrl_entries` builds one 8-byte entry per SPAD entry of the rank, in
trigger order (a HIER all-reduce contributes several chained entries), all at once
(:func:`serialize_spad` calls it for a rank); :func:`create_spad_ctrl_entry`, the
seed's name for one entry, is the one-entry form of it.  The table lives in the 4 KiB
CTRL SPAD: more than 512 entries of one subgraph is a LimitError.
"""

from __future__ import annotations

import numpy as np

from nrtrewrite.emit import formats as F
from nrtrewrite.errors import LimitError


def create_spad_ctrl_entry(entry: dict) -> np.ndarray:
    """One spad_ctrl_entry from an entry description (see lower.lower_rank)."""
    return spad_ctrl_entries([entry])


def spad_ctrl_entries(entries: list[dict]) -> np.ndarray:
    """The spad_ctrl_entry of each entry description, as one SPAD_DTYPE array."""
    recs = np.zeros(len(entries), F.SPAD_DTYPE)
    recs["header"] = F.SPAD_CC_OP
    recs["alg"] = [F.pack_spad_alg(e["algo_type"], e["algo_sub_type"], e["trigger_next"])
                   for e in entries]
    recs["flags"] = [(F.SPAD_FLAG_REPORTER if e["reporter"] else 0)
                     | (F.SPAD_FLAG_RING_WAIT_COMPLETE if e["ring_wait_complete"] else 0)
                     | (F.SPAD_FLAG_RING_SEND_COMPLETE if e["ring_send_complete"] else 0)
                     for e in entries]
    # mesh overlay: sema_shift_offset u16, sema_mask u16
    recs["channel_list"] = [(e["sema_shift_offset"] & 0xFFFF) | ((e["sema_mask"] & 0xFFFF) << 16)
                            if "sema_shift_offset" in e else e["channel_list"] for e in entries]
    return recs


def serialize_spad(entries: list[dict]) -> bytes:
    """The rank's SPAD table.  Each subgraph's entries are one CTRL SPAD program (the TOP_SP
    loads a subgraph's program when the subgraph runs), so the 4 KiB limit applies per
    subgraph."""
    per_sg: dict[str, int] = {}
    for e in entries:
        per_sg[e.get("subgraph", "")] = per_sg.get(e.get("subgraph", ""), 0) + 1
    for sg, n in per_sg.items():
        if n * F.SPAD_DTYPE.itemsize > F.SPAD_BYTES:
            raise LimitError(f"{n} SPAD entries need {n * F.SPAD_DTYPE.itemsize} bytes; the "
                             f"TOP_SP CTRL SPAD holds {F.SPAD_BYTES} "
                             f"({F.SPAD_BYTES // F.SPAD_DTYPE.itemsize} entries)", subgraph=sg or None)
    if not entries:
        return b""
    return spad_ctrl_entries(entries).tobytes()


def serialize_tpinc(entries: list[dict], by_entry: dict[tuple[int, int], np.ndarray]) -> bytes:
    """tp_inc_steps records in SPAD order, channels ascending; each run ends with last_sync."""
    parts = []
    for idx, entry in enumerate(entries):
        for ch in sorted(entry["channels"]):
            parts.append(by_entry[(idx, ch)])
    return b"".join(p.tobytes() for p in parts)  # bytes: no structured concatenate
