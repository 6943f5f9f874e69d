"""Plain-data views of a :class:`~nrtrewrite.neff.model.Model` (for ``inspect --json``).

Only dicts, lists, strings, ints, bools and ``None``: the CLI serialises them
with ``json.dumps``; other commands may reuse :func:`trigger_to_dict`.
Every key is documented in docs/CLI.md ("inspect --json").
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

from nrtrewrite.codes import VAR_TYPE_NAMES
from nrtrewrite.errors import cut_line, path_text
from nrtrewrite.neff.container import PKG_VERSION_SHA256
from nrtrewrite.neff.instructions import OpcodeClass, opcode_class, opcode_counts
from nrtrewrite.neff.model import Model, NeffHeader, Operand, Subgraph, SyncFields, Trigger

#: Version tag of the ``inspect --json`` document.
INSPECT_FORMAT = "nrtrewrite.inspect/1"

_VAR_TYPE_TEXT = {v: k for k, v in VAR_TYPE_NAMES.items()}


def header_to_dict(h: NeffHeader) -> dict[str, Any]:
    """Every header field; byte fields as lower-case hex, uuid in 8-4-4-4-12 form."""
    return {
        "pkg_version": h.pkg_version,
        "header_size": h.header_size,
        "data_size": h.data_size,
        "neff_version_major": h.neff_version_major,
        "neff_version_minor": h.neff_version_minor,
        "neff_build_version": h.neff_build_version,
        "num_tpb": h.num_tpb,
        "hash": h.hash.hex(),
        "hash_algorithm": "sha256" if h.pkg_version == PKG_VERSION_SHA256 else "md5",
        "uuid": str(uuidlib.UUID(bytes=h.uuid)),
        "name": h.name,
        "requested_tpb_count": h.requested_tpb_count,
        "tpb_per_node": list(h.tpb_per_node),
        "feature_bits": h.feature_bits,
        "lnc_size": h.lnc_size,
    }


def sync_to_dict(s: SyncFields | None) -> dict[str, int] | None:
    """Bytes 4..11 of a word as a dict (``None`` stays ``None``)."""
    if s is None:
        return None
    return {"wait_mode": s.wait_mode, "wait_idx": s.wait_idx, "update_mode": s.update_mode,
            "update_idx": s.update_idx, "semaphore_value": s.semaphore_value}


def operand_to_dict(op: Operand, sg: Subgraph) -> dict[str, Any]:
    """A trigger operand: var id and name, plus a byte offset or an SBUF access pattern."""
    var = sg.vars.get(op.var_id)
    out: dict[str, Any] = {"var_id": op.var_id, "var": var.name if var else None}
    if op.ap is None:
        out["offset"] = op.offset
    else:
        out["ap"] = {"start": op.ap.start, "partition_start": op.ap.partition_start,
                     "partition_count": op.ap.partition_count,
                     "dims": [list(d) for d in op.ap.dims]}
    return out


def trigger_to_dict(t: Trigger, sg: Subgraph) -> dict[str, Any]:
    """One decoded trigger (``sg`` is its subgraph, for var names)."""
    return {
        "ordinal": t.ordinal,
        "subgraph": t.subgraph,
        "engine": t.engine,
        "index": t.index,
        "num_words": t.num_words,
        "opcode": int(t.opcode),
        "opcode_name": t.opcode.name,
        "ctype": t.ctype.name,
        "op": t.op.name,
        "dtype": t.dtype.name,
        "dtype_size": t.dtype_size,
        "alu_op": t.alu_op.name if t.alu_op is not None else None,
        "replica_group_id": t.replica_group_id,
        "group_size": t.group_size,
        "stream_id": t.stream_id,
        "channel_id": t.channel_id,
        "src": operand_to_dict(t.src, sg),
        "dst": operand_to_dict(t.dst, sg),
        "num_elements": t.num_elements,
        "in_elements": t.in_elements,
        "out_elements": t.out_elements,
        "in_bytes": t.in_bytes,
        "out_bytes": t.out_bytes,
        "sync": sync_to_dict(t.sync),
        "ext_sync": sync_to_dict(t.ext_sync),
    }


def kick_words(sg: Subgraph, engine: str) -> list[dict[str, Any]]:
    """The ``TOPSP_KICK`` words (opcode 0xA2) of one stream, as docs/FORMATS.md §9 lays them
    out: where each is (``subgraph``, ``engine``, instruction ``index``), the ``trigger``
    ordinal it replaced, ``word`` (1: the second word of a former 0xD9 + 0xDA pair),
    ``spad_index`` (the trigger's first entry in a rank's ``spad.bin``) and its ``sync``.
    An input model's own 0xA2 words, if any, are read the same way."""
    import numpy as np

    from nrtrewrite.emit.formats import KICK_DTYPE, TOPSP_KICK_OPCODE
    data = sg.streams[engine]
    words = np.frombuffer(data, KICK_DTYPE, len(data) // KICK_DTYPE.itemsize)
    out = []
    for i in np.flatnonzero(words["opcode"] == TOPSP_KICK_OPCODE).tolist():
        w = words[i]
        out.append({"subgraph": sg.name, "engine": engine, "index": i,
                    "trigger": int(w["trigger"]), "word": int(w["word"]),
                    "spad_index": int(w["spad_index"]),
                    "sync": {k: int(w["sync"][k]) for k in w["sync"].dtype.names}})
    return out


def stream_summary(sg: Subgraph, engine: str) -> dict[str, Any]:
    """Instruction counts of one stream: total, per opcode class, per opcode."""
    data = sg.streams[engine]
    counts = opcode_counts(data)
    classes = {OpcodeClass.PSEUDO_TRIGGER: 0, OpcodeClass.OTHER_PSEUDO: 0,
               OpcodeClass.REGULAR: 0}
    for op, n in counts.items():
        classes[opcode_class(op)] += n
    return {
        "engine": engine,
        "member": f"{sg.name}/{engine}.bin",
        "bytes": len(data),
        "instructions": len(data) // 64,
        "classes": classes,
        "opcodes": {f"0x{op:02x}": n for op, n in sorted(counts.items())},
    }


def model_to_dict(model: Model) -> dict[str, Any]:
    """The whole ``inspect --json`` document."""
    by_name = {sg.name: sg for sg in model.subgraphs}
    referenced = {"neff.json"}
    for sg in model.subgraphs:
        referenced.add(f"{sg.name}/def.json")
        referenced.update(f"{sg.name}/{e}.bin" for e in sg.engines)
    return {
        "format": INSPECT_FORMAT,
        "file": path_text(model.path),  # (the same text whatever the locale)
        "hash_verified": model.hash_verified,
        "header": header_to_dict(model.header),
        "members": [{"name": n, "size": len(d), "extra": n not in referenced}
                    for n, d in model.members.items()],
        "world": list(model.world),
        "subgraphs": [{
            "name": sg.name,
            "engines": list(sg.engines),
            "vars": [{"var_id": v.var_id, "name": v.name, "type": _VAR_TYPE_TEXT[v.type],
                      "size": v.size, "partitions": v.partitions}
                     for v in sg.vars.values()],
            "replica_groups": [list(g) for g in sg.replica_groups],
            "streams": [stream_summary(sg, e) for e in sg.engines],
        } for sg in model.subgraphs],
        "triggers": [trigger_to_dict(t, by_name[t.subgraph]) for t in model.triggers],
        "kicks": [k for sg in model.subgraphs for e in sg.engines for k in kick_words(sg, e)],
        # (each part cut as a --json "error" is, on its own characters: a path of 100,000
        # characters in the where was written whole until 2026-12-07; docs/CLI.md)
        "warnings": [{"where": cut_line(str(w.where)), "message": cut_line(w.message)}
                     for w in model.warnings],
    }
