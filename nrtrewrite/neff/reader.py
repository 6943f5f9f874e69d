"""Read and validate a NEFF-like file into a :class:`~nrtrewrite.neff.model.Model`.

Stages, top to bottom:

1. container: header, hash, gzip'd tar (:mod:`nrtrewrite.neff.container`);
2. ``neff.json``: the subgraph list;
3. each ``sgNN/def.json``: vars, replica groups, engines; each engine stream;
4. triggers: a numpy scan finds 0xC7/0xC8/0xD9/0xDA words, construct decodes
   them, and every rule of NEFF-LIKE.md §3 is checked against the subgraph.

Every failure is a :class:`ParseError` (bytes do not follow the layout),
:class:`ValidationError` (they parse but break a rule) or :class:`LimitError`,
whose ``where`` names file, member, subgraph, stream, instruction index, byte
offset and field.  Integers are Python ints with explicit bound checks, so a
``num_elements`` or offset near 2**64 cannot wrap into acceptance.

Decisions beyond the contract (docs/ASSEMBLE.md "Validation rules"):

* 0xC7/0xC8 (DRAM operands): src var type ``input`` or ``tmp-buf``; dst var type
  ``output`` or ``tmp-buf``.  0xD9+0xDA: src and dst are ``state-buffer`` vars.
* Opaque instructions (every opcode other than 0xC7, 0xC8, 0xD9, 0xDA) are not
  inspected at all, not even ``length_dw``.
* Members not named by ``neff.json``/``def.json`` are kept and passed through, except
  where a stream would be left unlowered: ``<sg>/<x>.bin`` in a listed subgraph's folder
  whose ``x`` is not a listed engine, and any member in an ``sgNN/`` folder of a subgraph
  ``neff.json`` does not list, are refused (:func:`_check_member_places`).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import construct as cs
import numpy as np

from nrtrewrite.codes import (
    CTYPE_TO_OP, DTYPE_SIZE, NEC_MAX_COMM_N, SBUF_PARTITIONS, VAR_TYPE_NAMES, CType, Opcode,
    VarType,
)
from nrtrewrite import jsonin
from nrtrewrite.errors import (
    LimitError, ParseError, ValidationError, Where, did_you_mean, escape_controls,
)
from nrtrewrite.neff.container import (
    MAX_TRIGGERS, Container, Limits, check_member_name, read_container, read_file_bytes,
)
from nrtrewrite.neff.fields import explain_construct_error
from nrtrewrite.neff.instructions import (
    LENGTH_DW, WORD_FIELDS, WORD_SIZE, WORD_STRUCTS, scan_trigger_indices,
)
from nrtrewrite.neff.model import (
    AccessPattern, Model, Operand, Subgraph, SyncFields, Trigger, Var,
)

NEFF_JSON = "neff.json"
DEF_JSON = "def.json"
NEFF_LIKE_VERSION = 1
MAX_RANK = (1 << 31) - 1
MAX_VAR_ID = (1 << 32) - 1
MAX_VAR_SIZE = (1 << 64) - 1

#: Var types a trigger operand may name.
DRAM_SRC_TYPES = frozenset({VarType.INPUT, VarType.TMP_BUF})
DRAM_DST_TYPES = frozenset({VarType.OUTPUT, VarType.TMP_BUF})
SBUF_TYPES = frozenset({VarType.STATE_BUFFER})


def read_model(path: str | os.PathLike, *, verify_hash: bool = True,
               limits: Limits = Limits()) -> Model:
    """Read, validate and decode the NEFF-like file at ``path`` (never writes)."""
    path = os.fspath(path)
    return read_model_bytes(read_file_bytes(path, limits.max_file_bytes), path=path,
                            verify_hash=verify_hash, limits=limits)


def read_model_bytes(data: bytes, *, path: str = "<bytes>", verify_hash: bool = True,
                     limits: Limits = Limits(), digest: bytes | None = None) -> Model:
    """Like :func:`read_model` for a file already in memory; ``path`` only names it
    (``digest``: the payload's, already computed over these bytes:
    :func:`~nrtrewrite.neff.container.stream_container`)."""
    cont = read_container(data, path=path, verify_hash=verify_hash, limits=limits,
                          digest=digest)
    return model_from_container(cont, path=path, limits=limits)


def model_from_container(cont: Container, *, path: str = "<bytes>",
                         limits: Limits = Limits()) -> Model:
    """Validate the members of a parsed container and decode every trigger."""
    where = Where(file=path)
    neff_json = load_json_member(cont.members, NEFF_JSON, where)
    names = _check_neff_json(neff_json, where.merged(member=NEFF_JSON))
    subgraphs = [_read_subgraph(name, cont.members, where) for name in names]
    _check_member_places(subgraphs, cont.members, where)
    _check_comm_count(subgraphs, where)
    _check_trigger_count(subgraphs, where, limits.max_triggers)
    triggers: list[Trigger] = []
    for sg in subgraphs:
        for engine in sg.engines:
            triggers.extend(decode_stream_triggers(sg, engine, len(triggers), where,
                                                   max_triggers=limits.max_triggers))
    return Model(path=path, header=cont.header, subgraphs=subgraphs, triggers=triggers,
                 members=dict(cont.members), neff_json=neff_json,
                 warnings=list(cont.warnings), hash_verified=cont.hash_verified)


# ---------------------------------------------------------------------------
# JSON members

def load_json_member(members: dict[str, bytes], name: str, where: Where) -> dict:
    """Parse member ``name`` as a strict JSON object (UTF-8, no duplicate keys, no NaN,
    infinity nor number beyond a double's range: :func:`nrtrewrite.jsonin.loads`; a number
    that is not finite is named by its key path, ``field var[0].size``)."""
    mw = where.merged(member=name)
    if name not in members:
        raise ParseError("member missing from the archive", mw)
    try:
        text = members[name].decode("utf-8")
    except UnicodeDecodeError as err:
        raise ParseError(f"not UTF-8 ({err.reason} at byte {err.start})", mw) from None
    try:
        obj = jsonin.loads(text)
    except jsonin.JsonRule as err:
        raise ParseError(f"invalid JSON: {err.why}", mw.merged(field=err.path)) from None
    except json.JSONDecodeError as err:
        raise ParseError(f"invalid JSON: {err.msg} (line {err.lineno} column {err.colno})",
                         mw) from None
    except ValueError as err:  # an int over a lower sys.set_int_max_str_digits() setting
        raise ParseError(f"invalid JSON: {str(err).split(';')[0]}", mw) from None
    except RecursionError:
        raise ParseError("invalid JSON: nested too deeply", mw) from None
    if not isinstance(obj, dict):
        raise ParseError("must be a JSON object", mw)
    return obj


def _is_int(val: Any) -> bool:
    return type(val) is int  # bool is not an int here


def _need(obj: dict, key: str, where: Where, field: str | None = None) -> Any:
    if key not in obj:
        raise ValidationError(f"missing key {key!r}", where.merged(field=field or key))
    return obj[key]


def _int_field(val: Any, where: Where, field: str, lo: int, hi: int) -> int:
    if not _is_int(val):
        raise ValidationError(f"must be an integer, not {json.dumps(val)}",
                              where.merged(field=field))
    if not lo <= val <= hi:
        raise ValidationError(f"{val} is outside {lo}..{hi}", where.merged(field=field))
    return val


def _utf8_text(text: str, where: Where, field: str, what: str) -> str:
    """``text`` if it can be written as UTF-8: a JSON ``\\ud800`` escape decodes to a lone
    surrogate, which no UTF-8 output (a table, a manifest) can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValidationError(f"{what} is not Unicode text: lone surrogate "
                              f"U+{ord(text[err.start]):04X} (a JSON \\u escape) at character "
                              f"{err.start}", where.merged(field=field)) from None
    return text


def _safe_component(name: Any, where: Where, field: str, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValidationError(f"{what} must be a non-empty string", where.merged(field=field))
    _utf8_text(name, where, field, what)
    if "/" in name or check_member_name(name) is not None:
        raise ValidationError(f"{what} {name!r} is not a plain file name", where.merged(field=field))
    return name


def _check_neff_json(obj: dict, where: Where) -> list[str]:
    version = _need(obj, "neff_like_version", where)
    if not _is_int(version) or version != NEFF_LIKE_VERSION:
        raise ValidationError(f"neff_like_version must be {NEFF_LIKE_VERSION} (the one version "
                              f"nrtrewrite reads), not {json.dumps(version)}",
                              where.merged(field="neff_like_version"))
    names = _need(obj, "subgraphs", where)
    if not isinstance(names, list) or not names:
        raise ValidationError("must be a non-empty list of subgraph names",
                              where.merged(field="subgraphs"))
    seen: set[str] = set()
    for i, name in enumerate(names):
        _safe_component(name, where, f"subgraphs[{i}]", "subgraph name")
        if name in seen:
            raise ValidationError(f"subgraph {name!r} listed twice",
                                  where.merged(field=f"subgraphs[{i}]"))
        seen.add(name)
    return list(names)


# ---------------------------------------------------------------------------
# def.json

def _read_vars(items: Any, where: Where) -> dict[int, Var]:
    if not isinstance(items, list):
        raise ValidationError("must be a list", where.merged(field="var"))
    out: dict[int, Var] = {}
    for i, item in enumerate(items):
        f = f"var[{i}]"
        if not isinstance(item, dict):
            raise ValidationError("must be an object", where.merged(field=f))
        var_id = _int_field(_need(item, "var_id", where, f"{f}.var_id"), where, f"{f}.var_id",
                            0, MAX_VAR_ID)
        if var_id in out:
            raise ValidationError(f"duplicate var_id {var_id}", where.merged(field=f"{f}.var_id"))
        name = _need(item, "name", where, f"{f}.name")
        if not isinstance(name, str):
            raise ValidationError("must be a string", where.merged(field=f"{f}.name"))
        _utf8_text(name, where, f"{f}.name", "var name")
        tname = _need(item, "type", where, f"{f}.type")
        if not isinstance(tname, str) or tname not in VAR_TYPE_NAMES:
            listed = f"one of {', '.join(VAR_TYPE_NAMES)}"
            raise ValidationError(f"unknown var type {json.dumps(tname)}"
                                  f"{did_you_mean(tname, VAR_TYPE_NAMES, listed, json.dumps)}",
                                  where.merged(field=f"{f}.type"))
        vtype = VAR_TYPE_NAMES[tname]
        size = _need(item, "size", where, f"{f}.size")
        if not _is_int(size) or size <= 0:
            raise ValidationError(f"size must be a positive integer, not {json.dumps(size)}",
                                  where.merged(field=f"{f}.size"))
        _int_field(size, where, f"{f}.size", 1, MAX_VAR_SIZE)
        partitions = None
        if vtype == VarType.STATE_BUFFER:
            parts = _need(item, "partitions", where, f"{f}.partitions")
            partitions = _int_field(parts, where, f"{f}.partitions", 1, SBUF_PARTITIONS)
        # on a DRAM var, "partitions" means nothing in the contract (its size is bytes): an
        # unknown key, ignored like the others
        out[var_id] = Var(var_id=var_id, name=name, type=vtype, size=size, partitions=partitions)
    return out


def _read_groups(items: Any, where: Where) -> list[tuple[int, ...]]:
    if not isinstance(items, list) or not items:
        raise ValidationError("must be a non-empty list of groups",
                              where.merged(field="replica_groups"))
    if len(items) > NEC_MAX_COMM_N:
        raise ValidationError(f"{len(items)} replica groups, at most {NEC_MAX_COMM_N} "
                              "(NEC_MAX_COMM_N)", where.merged(field="replica_groups"))
    owner: dict[int, int] = {}
    groups = []
    for g, grp in enumerate(items):
        f = f"replica_groups[{g}]"
        if not isinstance(grp, list) or not grp:
            raise ValidationError("a replica group must be a non-empty list of ranks",
                                  where.merged(field=f))
        seen: set[int] = set()
        for k, rank in enumerate(grp):
            _int_field(rank, where, f"{f}[{k}]", 0, MAX_RANK)
            if rank in seen:
                raise ValidationError(f"rank {rank} appears twice in the group",
                                      where.merged(field=f"{f}[{k}]"))
            if rank in owner:
                raise ValidationError(f"rank {rank} is also in replica group {owner[rank]} "
                                      "(groups must be disjoint)", where.merged(field=f"{f}[{k}]"))
            seen.add(rank)
            owner[rank] = g
        groups.append(tuple(grp))
    return groups


#: The folder of a subgraph as NEFF-LIKE.md §1 names it (``sgNN/``).
_SUBGRAPH_FOLDER = re.compile(r"sg[0-9]+")


def _check_member_places(subgraphs: list[Subgraph], members: dict[str, bytes],
                         where: Where) -> None:
    """Refuse the members that look like engine streams nobody reads, whose collective
    triggers would be left unlowered (live pseudo triggers in the output): ``<sg>/<x>.bin``
    in a listed subgraph's folder whose ``x`` its def.json does not list as an engine, and
    anything in a folder of a subgraph neff.json does not list: an ``sgNN/`` folder, or one
    of any name that holds a ``def.json`` (listed subgraphs may have any name, so such a
    folder is one too; until 2026-12-05 only ``sgNN/`` was, and an unlisted ``aux/`` with a
    def.json and a 0xC7 in ``aux/sp.bin`` lowered, the trigger left live).  Other members
    not named by neff.json / def.json (top level, other folders, other files, deeper paths)
    pass through (docs/ASSEMBLE.md "Members")."""
    listed = {sg.name: sg for sg in subgraphs}
    defined = {m.partition("/")[0] for m in members if m.count("/") == 1
               and m.endswith("/" + DEF_JSON) and m.partition("/")[0] not in listed}
    for member in members:
        folder, slash, rest = member.partition("/")
        if not slash:
            continue
        sg = listed.get(folder)
        if sg is not None:
            if "/" not in rest and rest.endswith(".bin") and rest[:-4] not in sg.streams:
                raise ValidationError(
                    f"named like the stream of engine {rest[:-4]!r}, which {folder}/{DEF_JSON} "
                    f"does not list (engines: {', '.join(sg.engines)}): a trigger in it "
                    "would be left unlowered", where.merged(member=member, subgraph=folder))
        elif _SUBGRAPH_FOLDER.fullmatch(folder) or folder in defined:
            raise ValidationError(
                f"in the folder of subgraph {folder!r}, which {NEFF_JSON} does not list "
                f"(subgraphs: {', '.join(listed)}): a trigger in it would be left "
                "unlowered", where.merged(member=member))


def _check_comm_count(subgraphs: list[Subgraph], where: Where) -> None:
    """NEC_MAX_COMM_N bounds the distinct replica groups of the whole NEFF, not only of one
    def.json (REFERENCES.md "Runtime structures": 12 replica groups per NEFF)."""
    seen: set[tuple[int, ...]] = set()
    for sg in subgraphs:
        for g, grp in enumerate(sg.replica_groups):
            seen.add(tuple(grp))
            if len(seen) > NEC_MAX_COMM_N:
                raise ValidationError(
                    f"the model has more than {NEC_MAX_COMM_N} distinct replica groups over all "
                    f"subgraphs (NEC_MAX_COMM_N)",
                    where.merged(member=f"{sg.name}/{DEF_JSON}", subgraph=sg.name,
                                 field=f"replica_groups[{g}]"))


def _read_subgraph(name: str, members: dict[str, bytes], where: Where) -> Subgraph:
    sw = where.merged(subgraph=name)
    def_name = f"{name}/{DEF_JSON}"
    definition = load_json_member(members, def_name, sw)
    dw = sw.merged(member=def_name)
    variables = _read_vars(_need(definition, "var", dw), dw)
    groups = _read_groups(_need(definition, "replica_groups", dw), dw)
    engines = _need(definition, "engines", dw)
    if not isinstance(engines, list) or not engines:
        raise ValidationError("must be a non-empty list of engine names",
                              dw.merged(field="engines"))
    streams: dict[str, bytes] = {}
    for i, engine in enumerate(engines):
        _safe_component(engine, dw, f"engines[{i}]", "engine name")
        if engine in streams:
            raise ValidationError(f"engine {engine!r} listed twice", dw.merged(field=f"engines[{i}]"))
        member = f"{name}/{engine}.bin"
        mw = sw.merged(member=member, stream=engine)
        if member not in members:
            raise ParseError("engine stream missing from the archive", mw)
        data = members[member]
        if len(data) % WORD_SIZE:
            raise ParseError(f"stream length {len(data)} is not a multiple of {WORD_SIZE}", mw)
        streams[engine] = data
    return Subgraph(name=name, vars=variables, replica_groups=groups, engines=list(engines),
                    streams=streams, definition=definition)


# ---------------------------------------------------------------------------
# triggers

class _Ctx:
    """Location of one trigger, for errors."""

    def __init__(self, sg: Subgraph, engine: str, index: int, opcode: int, where: Where):
        self.sg = sg
        self.engine = engine
        self.index = index
        self.opcode = opcode
        self.where = where.merged(member=f"{sg.name}/{engine}.bin", subgraph=sg.name,
                                  stream=engine)

    def at(self, field: str, *, second: bool = False) -> Where:
        """Where of ``field`` in the first word (or in the 0xDA word if ``second``)."""
        index = self.index + (1 if second else 0)
        op = Opcode.PSEUDO_EXTENSION if second else self.opcode
        off = WORD_FIELDS[op][field][0]  # (a field the word lacks is our bug: a KeyError)
        return self.where.merged(index=index, offset=index * WORD_SIZE + off, field=field)


def _decode(ctx: _Ctx, stream: bytes, index: int, opcode: int) -> cs.Container:
    word = stream[index * WORD_SIZE:(index + 1) * WORD_SIZE]
    second = index != ctx.index
    if word[1] != LENGTH_DW:
        raise ParseError(f"length_dw must be {LENGTH_DW}, not {word[1]}",
                         ctx.at("length_dw", second=second))
    try:
        return WORD_STRUCTS[opcode].parse(word)
    except cs.ConstructError as err:
        fname, off, why = explain_construct_error(err, WORD_STRUCTS[opcode], word)
        w = ctx.where.merged(index=index, field=fname,
                             offset=index * WORD_SIZE + (off or 0))
        raise ParseError(why, w) from None


def _sync(word: cs.Container) -> SyncFields:
    return SyncFields(word.wait_mode, word.wait_idx, word.update_mode, word.update_idx,
                      word.semaphore_value)


def _ap(word: cs.Container, prefix: str) -> AccessPattern:
    dims = tuple((d.step, d.num) for d in word[f"{prefix}_dims"])
    return AccessPattern(start=word[f"{prefix}_start"],
                         partition_start=word[f"{prefix}_partition_start"],
                         partition_count=word[f"{prefix}_partition_count"],
                         dims=dims)  # type: ignore[arg-type]


def _check_var(ctx: _Ctx, var_id: int, allowed: frozenset, role: str, field: str,
               second: bool = False) -> Var:
    var = ctx.sg.vars.get(var_id)
    if var is None:
        raise ValidationError(f"{role} var_id {var_id} is not in "
                              f"{escape_controls(ctx.sg.name)}/def.json",
                              ctx.at(field, second=second))
    if var.type not in allowed:
        names = " or ".join(sorted(k for k, v in VAR_TYPE_NAMES.items() if v in allowed))
        rev = {v: k for k, v in VAR_TYPE_NAMES.items()}
        raise ValidationError(f"{role} var {var_id} ({var.name!r}) is {rev[var.type]}, "
                              f"a {role} here must be {names}", ctx.at(field, second=second))
    return var


def _check_range(ctx: _Ctx, var: Var, offset: int, nbytes: int, role: str, field: str) -> None:
    if offset + nbytes > var.size:
        # the field at fault: num_elements when its bytes alone do not fit the var
        culprit = "num_elements" if nbytes > var.size else field
        raise ValidationError(f"{role} bytes [{offset}, {offset + nbytes}) fall outside var "
                              f"{var.var_id} ({var.name!r}) of {var.size} bytes",
                              ctx.at(culprit))


def _check_ap_shape(ctx: _Ctx, ap: AccessPattern, role: str, second: bool) -> None:
    """An access pattern with no element (partition_count 0, a free dimension of num 0),
    named at its own field before its element count is compared with num_elements."""
    if ap.partition_count < 1:
        raise ValidationError(f"{role} partition_count is 0",
                              ctx.at(f"{role}_partition_count", second=second))
    if any(num < 1 for _, num in ap.dims):
        raise ValidationError(f"{role} free dimension has num 0 (unused dimensions have "
                              "num 1)", ctx.at(f"{role}_dims", second=second))


def _check_ap(ctx: _Ctx, var: Var, ap: AccessPattern, dsize: int, role: str,
              second: bool) -> None:
    prefix = role
    parts = var.partitions or 0
    if ap.partition_start + ap.partition_count > parts:
        raise ValidationError(
            f"{role} partitions [{ap.partition_start}, {ap.partition_start + ap.partition_count})"
            f" fall outside var {var.var_id} ({var.name!r}) with {parts} partitions",
            ctx.at(f"{prefix}_partition_start", second=second))
    lo = hi = 0
    for step, num in ap.dims:
        span = step * (num - 1)
        lo += min(0, span)
        hi += max(0, span)
    first = ap.start + lo * dsize
    end = ap.start + (hi + 1) * dsize
    if first < 0 or end > var.size:
        # the field at fault: the dims when the pattern's extent is more than the var holds,
        # else the start, which placed an extent that fits outside (as a DRAM operand's
        # offset is named where its elements would fit; an independent writer's reading)
        culprit = "dims" if (hi - lo + 1) * dsize > var.size else "start"
        raise ValidationError(f"{role} access pattern addresses bytes [{first}, {end}) of each "
                              f"partition, outside var {var.var_id} ({var.name!r}) of "
                              f"{var.size} bytes per partition",
                              ctx.at(f"{prefix}_{culprit}", second=second))


def _build_trigger(ctx: _Ctx, ordinal: int, w: cs.Container, ext: cs.Container | None
                   ) -> Trigger:
    sg = ctx.sg
    op = ctx.opcode
    ctype = CType.ALL_REDUCE if op == Opcode.PSEUDO_TRIGGER_ALL_REDUCE else w.ctype
    alu_op = w.alu_op
    if ctype == CType.ALL_GATHER:
        # NEFF-LIKE.md: 0xC8's alu_op is "0 for ALL_GATHER"; 0xD9's table says only alu_op,
        # and §3 asks for a known one: an SBUF all-gather takes 0 or a known op, which it
        # ignores (a copy reduces nothing; docs/ASSEMBLE.md "Validation rules")
        if alu_op is not None and ext is None:
            raise ValidationError(f"alu_op must be 0 for ALL_GATHER, not {alu_op.name}",
                                  ctx.at("alu_op"))
        alu_op = None
    elif alu_op is None:
        raise ValidationError(f"{ctype.name} needs an alu_op (ADD, MAX or MIN), not 0",
                              ctx.at("alu_op"))
    sbuf = ext is not None
    gid = ext.replica_group_id if sbuf else w.replica_group_id
    if gid >= len(sg.replica_groups):
        raise ValidationError(f"replica group {gid} does not exist "
                              f"({escape_controls(sg.name)}/def.json has "
                              f"{len(sg.replica_groups)})", ctx.at("replica_group_id", second=sbuf))
    group = sg.replica_groups[gid]
    n = w.num_elements
    if n == 0:
        raise ValidationError("num_elements must be > 0", ctx.at("num_elements"))
    if ctype == CType.REDUCE_SCATTER and n % len(group):
        raise ValidationError(f"REDUCE_SCATTER num_elements {n} is not divisible by the group "
                              f"size {len(group)}", ctx.at("num_elements"))
    dsize = DTYPE_SIZE[w.dtype]
    out_n = n * len(group) if ctype == CType.ALL_GATHER else (
        n // len(group) if ctype == CType.REDUCE_SCATTER else n)
    if sbuf:
        svar = _check_var(ctx, w.src_var_id, SBUF_TYPES, "src", "src_var_id")
        dvar = _check_var(ctx, ext.dst_var_id, SBUF_TYPES, "dst", "dst_var_id", second=True)
        src_ap, dst_ap = _ap(w, "src"), _ap(ext, "dst")
        _check_ap_shape(ctx, src_ap, "src", second=False)
        _check_ap_shape(ctx, dst_ap, "dst", second=True)
        if src_ap.num_elements != n:
            raise ValidationError(
                f"num_elements {n} != src access pattern elements "
                f"{src_ap.partition_count}x{'x'.join(str(d[1]) for d in src_ap.dims)} = "
                f"{src_ap.num_elements}", ctx.at("num_elements"))
        if dst_ap.num_elements != out_n:
            raise ValidationError(
                f"dst access pattern has {dst_ap.num_elements} elements, {ctype.name} of "
                f"{n} over {len(group)} ranks writes {out_n}", ctx.at("dst_dims", second=True))
        _check_ap(ctx, svar, src_ap, dsize, "src", second=False)
        _check_ap(ctx, dvar, dst_ap, dsize, "dst", second=True)
        src = Operand(var_id=svar.var_id, ap=src_ap)
        dst = Operand(var_id=dvar.var_id, ap=dst_ap)
        stream_id, channel_id = ext.stream_id, ext.channel_id
    else:
        svar = _check_var(ctx, w.src_var_id, DRAM_SRC_TYPES, "src", "src_var_id")
        dvar = _check_var(ctx, w.dst_var_id, DRAM_DST_TYPES, "dst", "dst_var_id")
        _check_range(ctx, svar, w.src_offset, n * dsize, "src", "src_offset")
        _check_range(ctx, dvar, w.dst_offset, out_n * dsize, "dst", "dst_offset")
        src = Operand(var_id=svar.var_id, offset=w.src_offset)
        dst = Operand(var_id=dvar.var_id, offset=w.dst_offset)
        stream_id = w.get("stream_id", 0)
        channel_id = 0
    return Trigger(
        ordinal=ordinal, subgraph=sg.name, engine=ctx.engine, index=ctx.index,
        opcode=Opcode(op), ctype=ctype, op=CTYPE_TO_OP[ctype], dtype=w.dtype,
        alu_op=alu_op, replica_group_id=gid, replica_group=group, stream_id=stream_id,
        channel_id=channel_id, src=src, dst=dst, num_elements=n, sync=_sync(w),
        num_words=2 if sbuf else 1, ext_sync=_sync(ext) if sbuf else None,
    )


def _trigger_firsts(stream: bytes) -> np.ndarray:
    """Instruction indices of a stream's triggers: its 0xC7, 0xC8 and 0xD9 words (a 0xDA
    is the second word of a 0xD9's trigger), from the opcodes alone."""
    indices = scan_trigger_indices(stream)
    return indices[np.frombuffer(stream, np.uint8)[indices * WORD_SIZE]
                   != Opcode.PSEUDO_EXTENSION]


def _too_many_triggers(sg: Subgraph, engine: str, index: int, max_triggers: int,
                       where: Where) -> LimitError:
    return LimitError(f"more than {max_triggers} collective triggers in the model "
                      "(MAX_TRIGGERS)", where.merged(
                          member=f"{sg.name}/{engine}.bin", subgraph=sg.name, stream=engine,
                          index=index, offset=index * WORD_SIZE))


def _check_trigger_count(subgraphs: list[Subgraph], where: Where, max_triggers: int) -> None:
    """More than ``max_triggers`` triggers over every stream of the model, counted from the
    opcodes (vectorised) before any word of any stream is decoded, is a
    :class:`LimitError` at the first trigger past the limit, in whichever stream it is."""
    counted = 0
    for sg in subgraphs:
        for engine in sg.engines:
            firsts = _trigger_firsts(sg.streams[engine])
            if counted + firsts.size > max_triggers:
                raise _too_many_triggers(sg, engine, int(firsts[max_triggers - counted]),
                                         max_triggers, where)
            counted += firsts.size


def decode_stream_triggers(sg: Subgraph, engine: str, first_ordinal: int,
                           where: Where = Where(), *, max_triggers: int = MAX_TRIGGERS
                           ) -> list[Trigger]:
    """Decode and validate every trigger of one stream; ordinals start at ``first_ordinal``.

    More than ``max_triggers`` triggers in the model (this stream's counted from the
    opcodes before any of its words is decoded, after the ``first_ordinal`` before it) is a
    :class:`LimitError` at the first word over the limit.  :func:`model_from_container`
    counts every stream's first (:func:`_check_trigger_count`), so a model over the limit
    is refused before any stream is decoded."""
    stream = sg.streams[engine]
    nwords = len(stream) // WORD_SIZE
    out: list[Trigger] = []
    pair_ext = -1
    indices = scan_trigger_indices(stream)
    firsts = _trigger_firsts(stream)
    if first_ordinal + firsts.size > max_triggers:
        raise _too_many_triggers(sg, engine, int(firsts[max_triggers - first_ordinal]),
                                 max_triggers, where)
    for index in indices.tolist():
        if index == pair_ext:
            continue
        opcode = stream[index * WORD_SIZE]
        ctx = _Ctx(sg, engine, index, opcode, where)
        if opcode == Opcode.PSEUDO_EXTENSION:
            raise ParseError("0xDA PSEUDO_EXTENSION without a 0xD9 right before it",
                             ctx.at("opcode"))
        word = _decode(ctx, stream, index, opcode)
        ext = None
        if opcode == Opcode.PSEUDO_TRIGGER_COLLECTIVE2:
            nxt = index + 1
            if nxt >= nwords:
                raise ParseError("0xD9 PSEUDO_TRIGGER_COLLECTIVE2 at the end of the stream; "
                                 "0xDA must follow", ctx.at("opcode"))
            if stream[nxt * WORD_SIZE] != Opcode.PSEUDO_EXTENSION:
                raise ParseError(f"0xD9 PSEUDO_TRIGGER_COLLECTIVE2 followed by opcode "
                                 f"0x{stream[nxt * WORD_SIZE]:02x}; 0xDA must follow",
                                 ctx.at("opcode"))
            ext = _decode(ctx, stream, nxt, Opcode.PSEUDO_EXTENSION)
            pair_ext = nxt
        out.append(_build_trigger(ctx, first_ordinal + len(out), word, ext))
    return out
