"""SERIALIZE (seed 000 §4.3): the TOP_SP cc_op SPAD table and its tp_inc_steps.

``create_spad_ctrl_entry``: one 8-byte entry per SPAD entry of the rank, in
trigger order (a HIER all-reduce contributes several chained entries).  The
table lives in the 4 KiB CTRL SPAD: more than 512 entries of one subgraph is a
LimitError.
"""

from __future__ import annotations

import numpy as np

from nrtrewrite.emit import formats as F
from nrtrewrite.errors import LimitError


def create_spad_ctrl_entry(entry: dict) -> np.ndarray:
    """One spad_ctrl_entry from an entry description (see lower.lower_rank)."""
    rec = np.zeros(1, F.SPAD_DTYPE)
    rec["header"] = F.SPAD_CC_OP
    rec["alg"] = F.pack_spad_alg(entry["algo_type"], entry["algo_sub_type"], entry["trigger_next"])
    rec["flags"] = ((F.SPAD_FLAG_REPORTER if entry["reporter"] else 0)
                    | (F.SPAD_FLAG_RING_WAIT_COMPLETE if entry["ring_wait_complete"] else 0)
                    | (F.SPAD_FLAG_RING_SEND_COMPLETE if entry["ring_send_complete"] else 0))
    if "sema_shift_offset" in entry:  # mesh overlay: sema_shift_offset u16, sema_mask u16
        rec["channel_list"] = (entry["sema_shift_offset"] & 0xFFFF) | (
            (entry["sema_mask"] & 0xFFFF) << 16)
    else:
        rec["channel_list"] = entry["channel_list"]
    return rec


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
    return np.concatenate([create_spad_ctrl_entry(e) for e in entries]).tobytes()


def serialize_tpinc(entries: list[dict], by_entry: dict[tuple[int, int], np.ndarray]) -> bytes:
    """tp_inc_steps records in SPAD order, channels ascending; each run ends with last_sync."""
    parts = []
    for idx, entry in enumerate(entries):
        for ch in sorted(entry["channels"]):
            parts.append(by_entry[(idx, ch)])
    return np.concatenate(parts).tobytes() if parts else b""
