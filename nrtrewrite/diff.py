"""Field-level comparison of two output folders (``nrtrewrite diff``; golden files in CI).

Every artifact is compared record by record on its decoded fields
(:func:`nrtrewrite.artifacts.decode_record`), the manifests key by key, and the
rewritten NEFF word by word, so a difference names rank, file, record and field.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import itertools
import json
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from typing import Any

import numpy as np

from nrtrewrite.artifacts import (
    HEX_FIELDS, RANK_DIR_NAME, column_texts, decode_columns, decode_record, is_our_output,
    looks_like_rank_folder, open_regular, rank_dir_order,
)
from nrtrewrite import jsonin
from nrtrewrite.codes import NetAddrMark
from nrtrewrite.emit import formats as F
from nrtrewrite.neff.container import BYTES_FIELDS, STRING_FIELDS
from nrtrewrite.neff.instructions import (INSTR_HEADER_DTYPE, INSTR_WORD_DTYPE, LENGTH_DW,
                                          WORD_SIZE)
from nrtrewrite.emit.formats import FORMAT_NAME
from nrtrewrite.errors import (LimitError, NrtRewriteError, OutputError, Where, counted,
                               did_you_mean, escape_controls, escape_line, escape_path,
                               json_text, path_text)


class _Absent:
    """What a side has where the other has a key, a field or an element (one object)."""

    _one = None

    def __new__(cls):
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def __repr__(self) -> str:
        return "<absent>"

    __str__ = __repr__


@dataclass(frozen=True)
class ItemKey:
    """An element of a manifest's keyed list (:data:`LIST_KEYS`) in a key path: the item
    whose ``keys`` have the ``values``, text ``[role="gw2"]``, JSON ``{"role": "gw2"}``; a
    region by two keys, ``[subgraph="sg00", name="x"]``, JSON
    ``{"subgraph": "sg00", "name": "x"}``."""

    keys: tuple[str, ...]
    values: tuple

    def text(self) -> str:
        return "[" + ", ".join(f"{k}={_json_text(v)}"
                               for k, v in zip(self.keys, self.values)) + "]"

    def to_json(self) -> dict:
        return dict(zip(self.keys, self.values))


#: A key, field or element one side does not have (``<absent>`` in the text, JSON ``null``
#: with ``a_present`` / ``b_present`` false).
ABSENT = _Absent()


@dataclass(frozen=True)
class Difference:
    """One line of ``diff``: ``where`` (file, relative to the output folder), ``record`` (an
    artifact's record index, an instruction index, or None), ``field`` (as shown) and both
    values.  ``path`` is the field as a list of keys (a manifest's JSON keys and list
    indices; a record's field name split at its dots), ``field`` when empty.  ``as_json``:
    the values are a JSON document's (a manifest's, a NEFF JSON member's), shown as JSON
    (``false != 0``, ``"x"``, a number as it is written)."""

    where: str  # "rank-0003/spad.bin" or "manifest.json" ...
    record: int | None
    field: str
    a: object
    b: object
    path: tuple = ()
    as_json: bool = False
    #: a FIFO file's record compared in its channel's ``fifo`` slice (:func:`_fifo_diff`):
    #: that channel (the text's `` (channel C)``, JSON ``channel``); None elsewhere
    channel: int | None = None
    #: and the ``basic_block_id`` of the block whose segment of the slice holds it
    #: (:func:`_slice_blocks`; None where the slice is not split into blocks as FORMATS §8
    #: says)
    block: int | None = None

    def line(self, name: Callable[[str], str] = str) -> str:
        """The line; ``name`` shows ``where`` (a path in the folder, ``NEFF:member``: the
        CLI's ``errors.escape_controls``); the field (a key path with its odd keys quoted)
        and the values (``repr`` or JSON) are quoted already."""
        rec = f"[{self.record}]" if self.record is not None else ""
        if self.channel is not None:
            rec += (f" (channel {self.channel})" if self.block is None
                    else f" (channel {self.channel}, block {self.block})")
        where = name(self.where)
        if self.field == "damaged":
            return f"{where} damaged in B: {self.b}"
        if self.as_json:
            return f"{where}{rec} {self.field}: {_json_text(self.a)} != {_json_text(self.b)}"
        # an artifact record's address fields in hex as dump shows them, any other integer
        # (counts, sizes, lengths, values) in decimal
        hx = self.record is not None and ":" not in self.where and self.field in HEX_FIELDS
        if self.field in ("added", "removed"):  # a FIFO record on one side only, decoded
            held = self.a if self.b is ABSENT else self.b
            return f"{where}{rec} {self.field}: {_record_text(held)}"
        return f"{where}{rec} {self.field}: {_fmt(self.a, hx)} != {_fmt(self.b, hx)}"

    def to_json(self) -> dict:
        # (``where`` names a file by its UTF-8 text already: path_text at each name read from
        # the disk, docs/CLI.md "Paths in the output"; a NEFF member is the archive's text)
        path = ([k.to_json() if isinstance(k, ItemKey) else k for k in self.path]
                if self.path else self.field.split("."))
        out = {"where": self.where, "record": self.record, "field": self.field,
               "path": path,
               "a": None if self.a is ABSENT else self.a,
               "b": None if self.b is ABSENT else self.b,
               "a_present": self.a is not ABSENT, "b_present": self.b is not ABSENT}
        if self.channel is not None:
            out["channel"] = self.channel
            if self.block is not None:
                out["block"] = self.block
        return out


def _record_text(d: dict) -> str:
    """A decoded record on one side only as text, ``{net_op_idx: 0, ..., mark_name:
    'EXEC_COMPLETE'}``: each field as a record line shows it (addresses in hex)."""
    return "{" + ", ".join(f"{k}: {_fmt(v, k in HEX_FIELDS)}" for k, v in d.items()) + "}"


def _fmt(v, hex_int: bool = False) -> str:
    if hex_int and isinstance(v, int) and not isinstance(v, bool):
        return f"0x{v:x}"
    return repr(v) if isinstance(v, str) else str(v)


def _json_text(v) -> str:
    """A JSON value as JSON text (``true``, ``null``, ``"x"``, ``[1, 2]``; a number with a
    fraction or an exponent as it is written), ``<absent>`` for :data:`ABSENT`."""
    if v is ABSENT:
        return str(v)
    if isinstance(v, jsonin.JsonFloat):
        return v.text
    try:
        text = json.dumps(v, ensure_ascii=False)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:  # a lone surrogate ("\ud800"): escaped, as JSON may
        return json.dumps(v)
    except (TypeError, ValueError, RecursionError):  # (not from a JSON document)
        return _fmt(v)


#: NEFF header fields are shown as the reader has them: text (``STRING_FIELDS``), hex
#: (``BYTES_FIELDS``) or integers; a bytes field longer than this (``reserved``; not the
#: strings, shown as text whatever their size) is shown as its differing byte count and first
#: offset, as a member that is neither JSON nor instructions.
_HEADER_HEX_MAX = 64


def _differing_bytes(xa: bytes, xb: bytes) -> tuple[int, int]:
    """How many of the first ``min(len)`` bytes differ, and the offset of the first (0 if
    none): a byte field or member shown by its differences, not its hex."""
    n = min(len(xa), len(xb))
    neq = np.frombuffer(xa, np.uint8, count=n) != np.frombuffer(xb, np.uint8, count=n)
    return int(np.count_nonzero(neq)), int(np.argmax(neq)) if n else 0


def _damaged(where: str, why: str) -> Difference:
    """B's ``where`` cannot be read as it should (A's can): ``WHERE damaged in B: WHY``."""
    return Difference(where, None, "damaged", ABSENT, why)


class _Unread(OSError):
    """A manifest that is not read (:func:`_manifest_size`): ``why`` says why, in place of
    an OS error's reason."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def _why(exc: OSError) -> str:
    """An OS error as the reason a file cannot be read: ``cannot read (Permission denied)``
    (the one form of every side and file, diff's ``damaged in B`` lines and A's errors), or
    an :class:`_Unread`'s own reason.
    Out of memory (ENOMEM: a map or a read the process's limits refuse) is no property of
    the file: a :class:`MemoryError`, the CLI's out-of-memory line (exit 71)."""
    if isinstance(exc, _Unread):
        return exc.why
    if exc.errno == errno.ENOMEM:
        raise MemoryError(f"{exc.strerror or exc} ({escape_path(exc.filename)})") from exc
    return f"cannot read ({exc.strerror or exc})"


def _cannot_read(p: Path, exc: OSError) -> OutputError:
    """A's ``p`` cannot be read: the reference is damaged, an error."""
    return OutputError(f"{escape_path(p)}: {_why(exc)}")


def _read_pair(rep: "Report", where: str, pa: Path, read_a: Callable[[], Any],
               read_b: Callable[[], Any]) -> tuple[Any, Any] | None:
    """``(read_a(), read_b())``; an OS error of A's read (of ``pa``) is raised
    (:func:`_cannot_read`), B's is its ``damaged`` line and None (the caller stops
    comparing)."""
    try:
        va = read_a()
    except OSError as exc:
        raise _cannot_read(pa, exc) from None
    try:
        vb = read_b()
    except OSError as exc:
        rep.add([_damaged(where, _why(exc))])
        return None
    return va, vb


@dataclass
class FileCount:
    """The differing records of one artifact file (or instructions of a NEFF member's
    instruction stream), counted over every record compared (the first
    ``min(records_a, records_b)``); ``fields``: raw field -> records in which it differs
    (docs/CLI.md)."""

    where: str
    records_a: int
    records_b: int
    differing_records: int = 0
    fields: dict[str, int] = field(default_factory=dict)
    #: what a record is called in the text: ``records`` (an artifact's), ``instructions``
    #: (a NEFF member's instruction stream, whose records are 64-byte words)
    unit: str = "records"
    #: a FIFO file compared slice by slice (:func:`_fifo_diff`): the slice's channel, its
    #: records in A and B being ``records_a``, ``records_b``, and the records past the
    #: common ones (``added`` in B, ``removed`` from A); None: the whole file
    channel: int | None = None
    added: int = 0
    removed: int = 0

    def line(self, name: Callable[[str], str] = str) -> str:
        """The line; ``name`` shows ``where`` (as :meth:`Difference.line`)."""
        n = min(self.records_a, self.records_b)
        per = ", ".join(f"{k} {v}" for k, v in self.fields.items() if v)
        if self.channel is None:
            return (f"{name(self.where)}: {self.differing_records} of {n} {self.unit} differ "
                    f"({per})")
        text = (f"{name(self.where)} (channel {self.channel}): {self.differing_records} of {n} "
                f"common {self.unit} differ")
        if per:
            text += f" ({per})"
        for k, what in ((self.added, "added"), (self.removed, "removed")):
            if k:
                text += f", {counted(k, 'record')} {what}"
        if self.records_a != self.records_b:
            text += f" ({self.records_a} != {self.records_b} records)"
        return text

    def to_json(self) -> dict:
        out = {"where": self.where, "records_a": self.records_a,
               "records_b": self.records_b,
               "differing_records": self.differing_records, "fields": dict(self.fields)}
        if self.channel is not None:
            out.update(channel=self.channel, added=self.added, removed=self.removed)
        return out


#: The top-level keys a :class:`ValueCount`'s text line names; the rest it counts (``--json``
#: ``keys`` has them all).
VALUE_KEYS_SHOWN = 8


@dataclass
class ValueCount:
    """The differing values of one manifest (or JSON member of the rewritten NEFF) where
    ``--max`` left some of them out: ``differing`` lines of its key paths, ``shown`` of them
    shown, ``keys``: its top-level key (``(root)`` for the document itself) -> lines under
    it (docs/CLI.md "diff")."""

    where: str
    differing: int
    shown: int
    keys: dict[str, int] = field(default_factory=dict)

    def line(self, name: Callable[[str], str] = str) -> str:
        """The line; ``name`` shows ``where`` (as :meth:`Difference.line`); past
        :data:`VALUE_KEYS_SHOWN` top-level keys the rest are counted, not named (a JSON
        member's keys are the model's, unbounded)."""
        items = list(self.keys.items())
        per = ", ".join(f"{k} {v}" for k, v in items[:VALUE_KEYS_SHOWN])
        if len(items) > VALUE_KEYS_SHOWN:
            rest = items[VALUE_KEYS_SHOWN:]
            lines = sum(v for _, v in rest)
            per += (f", {len(rest)} more {'key' if len(rest) == 1 else 'keys'} with {lines} "
                    f"{'line' if lines == 1 else 'lines'}")
        return (f"{name(self.where)}: {self.shown} of {self.differing} differing values "
                f"shown ({per})")

    def to_json(self) -> dict:
        return {"where": self.where, "differing_values": self.differing, "shown": self.shown,
                "keys": dict(self.keys)}


@dataclass
class FolderCount:
    """A rank folder on one side only where ``--max`` left its line (one difference, it
    stands for every entry of it) out: which side has it (``a`` or ``b``) and its
    ``entries``, the names listed in it (None: they cannot be listed) (docs/CLI.md
    "diff")."""

    where: str
    side: str
    entries: int | None

    def line(self, name: Callable[[str], str] = str) -> str:
        """The line; ``name`` shows ``where`` (as :meth:`Difference.line`)."""
        held = ("its entries cannot be listed" if self.entries is None
                else f"{self.entries} {'entry' if self.entries == 1 else 'entries'}")
        return (f"{name(self.where)}: 0 of 1 differences shown (folder in "
                f"{self.side.upper()} only, {held})")

    def to_json(self) -> dict:
        return {"where": self.where, "differences": 1, "shown": 0, "in": self.side,
                "entries": self.entries}


class Report:
    """Where the differences go as they are found: every difference is counted
    (:attr:`count`), only the first ``limit`` (None: all) are formatted and handed to
    ``on_difference(index, lines)``; ``on_file(FileCount)`` gets each artifact file whose
    records differ (and each NEFF instruction stream whose instructions differ) once it has
    been compared; ``on_values(ValueCount)`` each manifest or NEFF JSON member some of whose
    differing values ``limit`` left out.  A difference is one item (a differing record,
    manifest value, entry, header field, member or instruction) shown as one or more
    :class:`Difference` lines.
    Each hand-over runs with the counts that say it happened inside ``atomic()`` (the CLI's
    ``stops_deferred``: a stop cannot come between a block's lines and its count, or in the
    middle of its lines)."""

    def __init__(self, limit: int | None = None, on_difference=None, on_file=None,
                 on_records=None, atomic=contextlib.nullcontext, on_checksum=None,
                 strict: bool = False, on_layout=None, on_recompressed=None,
                 on_values=None, on_folder=None, on_positional=None):
        self.atomic = atomic
        self.limit = limit
        self.count = 0
        self.shown = 0
        self.on_difference = on_difference or (lambda index, lines: None)
        self.on_file = on_file or (lambda fc: None)
        self.on_records = on_records
        #: ``on_checksum(lines, covers)``: a checksum key's lines that are no difference,
        #: the file ``covers`` comparing identical (:func:`_settle`; docs/CLI.md "diff")
        self.on_checksum = on_checksum or (lambda lines, covers: None)
        #: ``--strict`` (docs/CLI.md "diff"): a note of a checksum key is a difference, and a
        #: manifest or a NEFF JSON member of the same JSON in other bytes is one
        #: (:func:`layout_lines`)
        self.strict = strict
        #: ``on_layout(lines)``: the top-level manifest or a NEFF JSON member holds the same
        #: JSON in other bytes,
        #: a note without ``strict`` (:func:`layout_note`)
        self.on_layout = on_layout or (lambda lines: None)
        #: ``on_recompressed(name)``: the rewritten NEFFs' members all compare identical where
        #: their payloads' bytes differ (:func:`recompressed_note`), a note beside the
        #: difference
        self.on_recompressed = on_recompressed or (lambda name: None)
        #: ``on_values(ValueCount)``: a manifest's or a NEFF JSON member's count past ``limit``
        #: (:meth:`add_values`)
        self.on_values = on_values or (lambda vc: None)
        #: ``on_folder(FolderCount)``: a rank folder on one side only whose line is past
        #: ``limit`` (:meth:`add_folder`)
        self.on_folder = on_folder or (lambda fc: None)
        #: ``on_positional(where, why)``: FIFO file ``where``, whose bytes differ, compared by
        #: position, not slice by slice, and why (:func:`_fifo_slices`), before its lines
        self.on_positional = on_positional or (lambda where, why: None)

    def room(self) -> int | None:
        """How many more differences will be shown (None: no limit)."""
        return None if self.limit is None else max(0, self.limit - self.shown)

    def add(self, lines: Iterable[Difference]) -> None:
        """One difference; ``lines`` is only iterated when it is shown."""
        if self.limit is None or self.shown < self.limit:
            with self.atomic():
                self.on_difference(self.count, list(lines))
                self.shown += 1
                self.count += 1
        else:
            self.count += 1

    def add_many(self, n: int) -> None:
        """``n`` more differences counted and not shown (they come after the shown ones)."""
        self.count += n

    def add_first(self, n: int, lines_of) -> None:
        """``n`` differences, the j-th made by ``lines_of(j)`` only if it is shown."""
        room = self.room()
        m = n if room is None else min(room, n)
        for j in range(m):
            self.add(lines_of(j))
        self.add_many(n - m)

    def add_each(self, diffs: Iterable[Difference]) -> None:
        """Each line one difference (a manifest's keys and values)."""
        for d in diffs:
            self.add([d])

    def add_values(self, where: str, diffs: Iterable[Difference], objects: bool) -> None:
        """The key paths' lines of manifest (or NEFF JSON member) ``where``, each one
        difference (:meth:`add_each`); then, when some of them are not shown (past
        ``limit``), its :class:`ValueCount` to ``on_values``: how many differ, how many are
        shown, and how many under each top-level key (``objects``: both documents are
        objects; otherwise every line is under ``(root)``)."""
        count, shown = self.count, self.shown
        keys: dict[str, int] = {}

        def tallied() -> Iterator[Difference]:
            for d in diffs:
                label = _key_text(d.path[:1]) if objects else "(root)"
                keys[label] = keys.get(label, 0) + 1
                yield d

        self.add_each(tallied())
        if self.shown - shown < self.count - count:
            with self.atomic():
                self.on_values(ValueCount(where, self.count - count, self.shown - shown, keys))

    def add_folder(self, where: str, side: str, entries: Callable[[], int | None]
                   ) -> None:
        """Rank folder ``where`` on ``side`` (``a`` or ``b``) only: its line, one difference
        (:meth:`add`); when ``limit`` leaves it out, its :class:`FolderCount` to
        ``on_folder``, its entries counted then (``entries()``)."""
        shown = self.shown
        self.add([Difference(where, None, "folder", side == "a", side == "b")])
        if self.shown == shown:
            with self.atomic():
                self.on_folder(FolderCount(where, side, entries()))

    def add_records(self, where: str, name: str, recs: np.ndarray, xa: np.ndarray,
                    xb: np.ndarray, channel: int | None = None,
                    blocks: np.ndarray | None = None) -> None:
        """Differing records of artifact ``name``, one difference each: record ``recs[j]``
        is ``xa[j]`` in A and ``xb[j]`` in B.  The ones still shown go, :data:`RECORDS_BLOCK`
        at a time, to ``on_records(index of the first, where, name, recs, xa, xb)`` when it
        takes them (returns True: it wrote their lines itself, :func:`record_line_texts`),
        else one by one as :func:`_record_lines` to ``on_difference``; the rest are counted
        without being decoded.  ``channel``: the FIFO slice's the records are compared in
        (:func:`_records_diff`), named in their lines (``on_records`` is given it as
        ``channel=``), and ``blocks``, each record's block (or None: not known), as
        ``blocks=``."""
        n = len(recs)
        room = self.room()
        m = n if room is None else min(room, n)
        kw = {} if channel is None else {"channel": channel}
        for lo in range(0, m, RECORDS_BLOCK):
            hi = min(m, lo + RECORDS_BLOCK)
            if self.on_records is not None:
                with self.atomic():
                    if blocks is not None:
                        kw["blocks"] = blocks[lo:hi]
                    took = self.on_records(self.count, where, name, recs[lo:hi], xa[lo:hi],
                                           xb[lo:hi], **kw)
                    if took:
                        self.count += hi - lo
                        self.shown += hi - lo
                if took:
                    continue
            for j in range(lo, hi):
                self.add(_record_lines(where, name, int(recs[j]), xa[j], xb[j], channel,
                                       None if blocks is None else int(blocks[j])))
        self.add_many(n - m)


def _key_text(path: tuple) -> str:
    """A JSON key path as text: ``triggers[0].chunk.pgta``; a key that is not a plain name
    quoted, ``files["cce.bin"].records`` (:func:`jsonin.joined_key`, as every reader's key
    path); the empty path ``(root)``."""
    out = ""
    for k in path:
        if isinstance(k, ItemKey):
            out = f"{out}{k.text()}"
        else:
            out = f"{out}[{k}]" if isinstance(k, int) else jsonin.joined_key(out, k)
    return out or "(root)"


def _canonical(doc) -> str:
    """A JSON value as one text, keys sorted: equal for equal values of equal types (``true``
    is not ``1``), whatever the order of their keys."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def _which_differ(xs: list, ys: list) -> list[bool]:
    """Whether each pair of JSON values (read with ``exact_floats``) differs: in type
    (``false`` and ``0``, ``2`` and ``2.0``) or value (numbers by their exact decimal value,
    :class:`jsonin.JsonFloat`), keys in any order.  Python's ``==`` (in C: a large equal
    subtree costs no Python walk) finds every difference but ``true`` / ``1`` inside
    containers (``[1] == [True]``): the containers it calls equal are checked by their
    :func:`_canonical` text, all at once (one by one only when that differs)."""
    out, same = [], []
    for i, (x, y) in enumerate(zip(xs, ys)):
        if type(x) is not type(y) or not x == y:
            out.append(True)
        else:
            out.append(False)
            if isinstance(x, (dict, list)):
                same.append(i)
    if same and _canonical([xs[i] for i in same]) != _canonical([ys[i] for i in same]):
        for i in same:
            out[i] = _canonical(xs[i]) != _canonical(ys[i])
    return out


#: The manifests' lists whose items are objects each named by a key (docs/FORMATS.md §1.1,
#: §1.2), by the list's own key: ``diff`` lines their items up by it (:func:`_list_key`), by
#: the first of the keys (a tuple of fields) that names each item once.  ``memory.regions``
#: by (``subgraph``, ``name``): a var's name is its subgraph's, two subgraphs may reuse one,
#: and a var may be named ``scratch`` or ``gw`` (the subgraph of those regions is null);
#: by ``name`` alone where an item lacks ``subgraph``.
#: Not ``triggers`` (``trigger``) nor ``topology.ranks`` (``rank``): the key is the item's
#: position there, and the pairs are the positional ones.
LIST_KEYS = {"buffers": (("role",),), "channels": (("channel",),), "legs": (("name",),),
             "kangaring": (("channel",),), "regions": (("subgraph", "name"), ("name",)),
             "fifo": (("channel",),)}


#: The top-level manifest's lists of integers each naming an item by itself (FORMATS §1.1:
#: ``ranks``, the ranks that have a folder), by their key path: ``diff`` lines them up by
#: value (:func:`_keyed_walk`), a rank on one side only named ``ranks[rank=N]``, not a
#: change of the values after it (until 2026-12-07 by position: a removed rank read as
#: changed ``ranks[i]``).
VALUE_LISTS = {("ranks",): "rank"}


def _each_integer_once(items: list) -> bool:
    return all(type(x) is int for x in items) and len(set(items)) == len(items)


def _item_key(x, keys: tuple[str, ...]):
    """The value of item ``x``'s ``keys`` (a tuple for several keys), or :data:`ABSENT` where
    ``x`` is no object or one key is missing or of another type: one key a string or an
    integer; of several, each a string, an integer or null, not all null."""
    if not isinstance(x, dict):
        return ABSENT
    vs = tuple(x.get(k, ABSENT) for k in keys)
    if len(keys) == 1:
        return vs[0] if type(vs[0]) in (str, int) else ABSENT
    if any(type(v) not in (str, int, type(None)) for v in vs) or all(v is None for v in vs):
        return ABSENT
    return vs


def _list_key(path: tuple, a: list, b: list) -> tuple[str, ...] | None:
    """The keys that line up lists ``a`` and ``b`` at ``path`` (:data:`LIST_KEYS` by the
    list's own key, the first that fits), when they name each item once on both sides:
    every item an object with those keys (:func:`_item_key`), no value twice on a side.
    None: by position."""
    choices = LIST_KEYS.get(path[-1], ()) if path and isinstance(path[-1], str) else ()
    for keys in choices:
        if all(_names_each_once(items, keys) for items in (a, b)):
            return keys
    return None


def _names_each_once(items: list, keys: tuple[str, ...]) -> bool:
    seen = set()
    for x in items:
        v = _item_key(x, keys)
        if v is ABSENT or v in seen:
            return False
        seen.add(v)
    return True


def _json_diff(where: str, a, b, path: tuple = (), keyed: bool = False
               ) -> Iterator[Difference]:
    """The differences of two JSON documents (read with ``exact_floats``), key by key: a key
    or element on one side only has :data:`ABSENT` on the other (a list whose length changed:
    its length, then each added or removed element), values of other types (``false`` and
    ``0``, ``2`` and ``2.0``) or other values (:func:`_which_differ`) are one difference.
    Lists are lined up by position, or with ``keyed`` (a manifest) by their items' key where
    one names each item (:func:`_list_key`, :func:`_keyed_walk`)."""
    if _which_differ([a], [b])[0]:
        yield from _json_walk(where, a, b, path, keyed)


def _keyed_walk(where: str, a: list, b: list, path: tuple, keys: tuple[str, ...],
                keyed: bool, by_value: bool = False) -> Iterator[Difference]:
    """Lists ``a`` and ``b`` known to differ, lined up by their items' ``key``: the length if
    it changed; the order of the items on both sides (``PATH (order)``: each side's keys)
    if the items of both sides' keys come in another order; then A's items in A's order
    (one in B too compared with it, ``PATH[KEY=VALUE]``, one not in B removed), then B's
    that A has not (added).  ``keys``: one key, or several (a tuple value each item, a list
    of them in ``PATH (order)``); ``by_value``: each item is its own key, named ``keys[0]``
    (:data:`VALUE_LISTS`)."""
    if by_value:
        ka, kb = list(a), list(b)
    else:
        ka, kb = [_item_key(x, keys) for x in a], [_item_key(x, keys) for x in b]
    at_b = {v: j for j, v in enumerate(kb)}
    in_a = set(ka)
    if len(a) != len(b):
        yield Difference(where, None, f"{_key_text(path)} (length)", len(a), len(b),
                         (*path, "(length)"), as_json=True)
    pairs = [(i, at_b[v]) for i, v in enumerate(ka) if v in at_b]  # (A's, B's index)
    if any(j >= k for (_, j), (_, k) in zip(pairs, pairs[1:])):  # (B's not increasing)
        yield Difference(where, None, f"{_key_text(path)} (order)",
                         ka if len(keys) == 1 else [list(v) for v in ka],
                         kb if len(keys) == 1 else [list(v) for v in kb],
                         (*path, "(order)"), as_json=True)
    differ = dict(zip((i for i, _ in pairs), _which_differ([a[i] for i, _ in pairs],
                                                           [b[j] for _, j in pairs])))
    for i, v in enumerate(ka):
        sub = (*path, ItemKey(keys, v if len(keys) > 1 else (v,)))
        if v not in at_b:
            yield Difference(where, None, _key_text(sub), a[i], ABSENT, sub, as_json=True)
        elif differ[i]:
            yield from _json_walk(where, a[i], b[at_b[v]], sub, keyed)
    for j, v in enumerate(kb):
        if v not in in_a:
            sub = (*path, ItemKey(keys, v if len(keys) > 1 else (v,)))
            yield Difference(where, None, _key_text(sub), ABSENT, b[j], sub, as_json=True)


def _json_walk(where: str, a, b, path: tuple, keyed: bool = False) -> Iterator[Difference]:
    """:func:`_json_diff` of values known to differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = sorted(set(a) | set(b), key=str)
        common = [k for k in keys if k in a and k in b]
        differ = dict(zip(common, _which_differ([a[k] for k in common],
                                                [b[k] for k in common])))
        for k in keys:
            sub = (*path, k)
            if k not in a or k not in b:
                yield Difference(where, None, _key_text(sub), a.get(k, ABSENT), b.get(k, ABSENT),
                                 sub, as_json=True)
            elif differ[k]:
                yield from _json_walk(where, a[k], b[k], sub, keyed)
    elif isinstance(a, list) and isinstance(b, list):
        if keyed and (keys := _list_key(path, a, b)) is not None:
            yield from _keyed_walk(where, a, b, path, keys, keyed)
            return
        if (keyed and (name := VALUE_LISTS.get(path)) is not None
                and _each_integer_once(a) and _each_integer_once(b)):
            yield from _keyed_walk(where, a, b, path, (name,), keyed, by_value=True)
            return
        if len(a) != len(b):
            yield Difference(where, None, f"{_key_text(path)} (length)", len(a), len(b),
                             (*path, "(length)"), as_json=True)
        n = min(len(a), len(b))
        for i, differs in enumerate(_which_differ(a[:n], b[:n])):
            if differs:
                yield from _json_walk(where, a[i], b[i], (*path, i), keyed)
        for i in range(n, max(len(a), len(b))):  # added or removed
            sub = (*path, i)
            yield Difference(where, None, _key_text(sub), a[i] if i < len(a) else ABSENT,
                             b[i] if i < len(b) else ABSENT, sub, as_json=True)
    else:
        yield Difference(where, None, _key_text(path), a, b, path or ("(root)",), as_json=True)


#: The top-level manifest's checksum of the rewritten NEFF (FORMATS §1.1 ``output_neff``):
#: the key :func:`_top_checksum` gives for it.
NEFF_CHECKSUM = "(the rewritten NEFF)"


def _top_checksum(path: tuple) -> str | None:
    """What a key path of the top-level manifest is the checksum of, when ``diff`` compares
    that file itself (docs/CLI.md "diff"): ``rank_manifests.rank-NNNN`` that rank folder's
    name (its ``manifest.json``), ``output_neff.sha256`` :data:`NEFF_CHECKSUM`; None for
    any other path (``input.sha256``: the model, which ``diff`` does not compare)."""
    if (len(path) >= 2 and path[0] == "rank_manifests" and isinstance(path[1], str)
            and RANK_DIR_NAME.fullmatch(path[1])):
        return path[1]
    if tuple(path[:2]) == ("output_neff", "sha256"):
        return NEFF_CHECKSUM
    return None


#: The keys of a rank manifest's ``files`` item that record its artifact (FORMATS §1.2): its
#: checksum, its size and its record count, each what ``diff`` finds comparing the file
#: itself (a length that differs is its ``records`` line), so none is a difference of its own
#: (docs/CLI.md "diff"); the note's words for each (:func:`checksum_note`).
RECORDED_KEYS = {"sha256": "a checksum", "bytes": "the size", "records": "the record count"}


def _rank_checksum(path: tuple) -> str | None:
    """What a key path of a rank manifest records of a file ``diff`` compares itself:
    ``files["cce.bin"].sha256``, ``.bytes`` or ``.records`` (:data:`RECORDED_KEYS`), that
    artifact's name (FORMATS §1.2; a ``files`` item of a name ``lower`` does not write is no
    file compared: None, as for any other path)."""
    if (len(path) >= 3 and path[0] == "files" and path[1] in F.ARTIFACTS
            and path[2] in RECORDED_KEYS):
        return path[1]
    return None


def _hold_checksums(diffs: Iterable[Difference], checksum_of: Callable[[tuple], str | None],
                    held: dict[str, list[Difference]]) -> Iterator[Difference]:
    """``diffs`` but the lines of checksum keys (``checksum_of`` a line's path: the file it
    covers, or None), which go to ``held`` by that file: the file is compared itself, so a
    checksum's line would only repeat its difference (or, for a manifest whose layout alone
    changed, make one up); :func:`_settle` decides each once the file is compared.  A key
    one side has and the other has not, or holds a value of another type, is no stale value
    but a manifest of another shape (``simulate`` refuses it): a difference, as any other
    key's (reviews 49l, 49w)."""
    for d in diffs:
        covered = checksum_of(d.path)
        if covered is None or not _both_of_its_type(d):
            yield d
        else:
            held.setdefault(covered, []).append(d)


def _both_of_its_type(d: Difference) -> bool:
    """Whether both sides hold the checksum key of line ``d`` itself (not a value inside
    it) with a value of the type the key records: a ``files`` item's ``bytes`` and
    ``records`` an integer, a checksum a string (FORMATS §1.1, §1.2)."""
    want = int if d.path[-1] in ("bytes", "records") else str
    return (tuple(d.path) == _held_key(d.path)
            and type(d.a) is want and type(d.b) is want)  # (type: a bool is no integer)


def _settle(rep: "Report", lines: list[Difference] | None, covers: str, same: bool) -> None:
    """A held checksum key's ``lines`` (None: its values are equal) once the file it covers,
    ``covers``, is compared: no difference either way; when the file compares identical
    (``same``), ``rep.on_checksum`` is told, once per key (the note on stderr, ``--json``'s
    ``checksums``), since the recorded values then differ where the content does not."""
    if lines and same:
        for _, key_lines in itertools.groupby(lines, lambda d: _held_key(d.path)):
            if rep.strict:  # --strict: the key's lines are a difference
                rep.add(list(key_lines))
                continue
            with rep.atomic():
                rep.on_checksum(list(key_lines), covers)


def _held_key(path: tuple) -> tuple:
    """The checksum key a held line's ``path`` belongs to (a value inside it: its key's):
    ``("files", NAME, "bytes")`` in a rank manifest, ``("rank_manifests", "rank-0003")`` or
    ``("output_neff", "sha256")`` in the top one."""
    return tuple(path[:3] if path[:1] == ("files",) else path[:2])


def checksum_note(lines: list[Difference], covers: str,
                  name: Callable[[str], str] = str) -> str:
    """The note that a checksum key (or a ``files`` item's ``bytes`` or ``records``,
    :data:`RECORDED_KEYS`) differs where the file it covers compares identical (docs/CLI.md
    "diff"): its line(s) (``name`` shows the folder's paths, as :meth:`Difference.line`) and
    the file."""
    key = _held_key(lines[0].path)
    what = RECORDED_KEYS.get(key[2], "a checksum") if len(key) == 3 else "a checksum"
    return (f"{'; '.join(d.line(name) for d in lines)} ({what} of {name(covers)}, which "
            "compares identical: no difference)")


#: A manifest's field when it holds the same JSON as the other side's in other bytes (its
#: layout: spaces, the order of keys, a number spelt otherwise): its files' sha256s.
LAYOUT_FIELD = "sha256 (the same JSON in other bytes)"


def layout_lines(where: str, a: Path, b: Path) -> list[Difference]:
    """The line of manifest ``where`` (``a`` and ``b`` its two files) holding the same JSON in
    other bytes: ``WHERE sha256 (the same JSON in other bytes): 'A' != 'B'`` (path
    ``["sha256"]``).  A difference with ``--strict``; otherwise the top-level manifest's is a
    note (:func:`layout_note`), a rank manifest's nothing (docs/CLI.md "diff")."""
    try:
        return [Difference(where, None, LAYOUT_FIELD, _sha256(a), _sha256(b), ("sha256",))]
    except OSError as exc:  # (both were read just before: it changed meanwhile)
        raise OutputError(f"{escape_path(exc.filename)}: {_why(exc)}") from None


def _layout(rep: "Report", lines: list[Difference]) -> None:
    """A manifest's (or a NEFF JSON member's) :func:`layout_lines`: with ``--strict`` one
    difference, otherwise ``rep.on_layout``'s note (docs/CLI.md "diff")."""
    if rep.strict:
        rep.add(lines)
    else:
        with rep.atomic():
            rep.on_layout(lines)


#: A JSON text's tokens (:func:`same_layout`): a string, a run of a number's or literal's
#: characters, a punctuation mark, a run of whitespace (any other byte alone).
_JSON_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[^\s"{}\[\]:,]+|[{}\[\]:,]|\s+|.', re.DOTALL)
#: Whole JSON strings and the bytes between them, up to the end of the last string that
#: closes before the end position (possessive: no backtracking; :func:`_token_start`).
_STRINGS = re.compile(rb'(?:[^"]*+"(?:[^"\\]++|\\.)*+")*+', re.DOTALL)
#: JSON's punctuation marks, each a token of its own outside a string.
_MARKS = tuple(bytes([c]) for c in b"{}[]:,")


def _next_difference(xa: np.ndarray, i: int, xb: np.ndarray, j: int) -> int | None:
    """How far past ``xa[i]`` and ``xb[j]`` the two texts first differ (one ending before
    the other included), None if their rests are equal: compared a block at a time."""
    k, step = 0, 4096
    while True:
        ca, cb = xa[i + k:i + k + step], xb[j + k:j + k + step]
        m = min(len(ca), len(cb))
        ne = np.flatnonzero(ca[:m] != cb[:m])
        if len(ne):
            return k + int(ne[0])
        if len(ca) != len(cb):
            return k + m
        if m < step:
            return None
        k, step = k + m, min(step * 2, CHUNK_BYTES)


def _token_start(text: bytes, i: int, d: int) -> int:
    """A token of JSON ``text`` that starts in ``[i, d]`` with no token boundary between it
    and ``d`` but a few: ``i`` starts a token outside a string.  The opening quote of a
    string holding ``d`` (one that does not close before it), else the position past the
    last punctuation mark (outside a string) or string before ``d``, ``i`` if neither:
    found by C scans (:data:`_STRINGS`, ``rfind``; without a backslash before ``d``, every
    quote delimits a string: counted), not a token at a time."""
    if text.find(b"\\", i, d) < 0:
        q = text.rfind(b'"', i, d)
        if text.count(b'"', i, d) % 2:  # (a string opened at q runs past d)
            return q
        e = q + 1 if q >= 0 else i
    else:
        e = _STRINGS.match(text, i, d).end()  # (past the last string closed before d)
        q = text.find(b'"', e, d)
        if q >= 0:  # (a string opened at q runs past d)
            return q
    return max(e, *(text.rfind(c, e, d) + 1 for c in _MARKS))  # (no string in [e, d))


def same_layout(a: Path, b: Path, n_values: int) -> bool:
    """Whether manifests ``a`` and ``b``, whose JSON is the same but for ``n_values``
    scalar values (the held checksum keys' lines, :func:`_hold_checksums`), are in the same
    layout: their texts' tokens line up one for one and differ in those values' tokens
    alone (a space, the order of keys or a number spelt otherwise is another token).  The
    texts are compared as bytes; at each place they differ, the tokens are read from a
    token start just before it (:func:`_token_start`) to the first pair that differs, and
    the bytes are compared again past that pair: linear in the texts' length (until
    2026-12-07 the whole line of each difference was split into tokens: a one-line 9 MiB
    manifest took 2 s).  Both were read just before: one that changed meanwhile is an
    error, as :func:`layout_lines`."""
    def text(p: Path) -> bytes:
        try:
            return _read_whole(p)
        except OSError as exc:
            raise OutputError(f"{escape_path(p)}: {_why(exc)}") from None
    ba, bb = text(a), text(b)
    xa, xb = np.frombuffer(ba, np.uint8), np.frombuffer(bb, np.uint8)
    i = j = n = 0  # (i, j: where a token starts in A and in B, the tokens before lined up)
    while True:
        k = _next_difference(xa, i, xb, j)
        if k is None:
            return n == n_values
        s = _token_start(ba, i, i + k)  # (the bytes before i + k equal: a start in B too)
        pa, pb = s, j + (s - i)
        while True:  # (the tokens from there, to the pair holding the difference)
            ta, tb = _JSON_TOKEN.match(ba, pa), _JSON_TOKEN.match(bb, pb)
            if ta is None or tb is None:  # (one text has more tokens)
                return False
            pa, pb = ta.end(), tb.end()
            if ta.group() != tb.group():
                break
        n += 1
        if n > n_values:  # (more tokens differ than values)
            return False
        i, j = pa, pb


def layout_note(lines: list[Difference], name: Callable[[str], str] = str) -> str:
    """The note that the top-level manifests, or a NEFF JSON member, hold the same JSON in
    other bytes."""
    return (f"{'; '.join(d.line(name) for d in lines)} (its layout alone: no difference; "
            "--strict makes it one)")


def positional_note(where: str, why: str, name: Callable[[str], str] = str) -> str:
    """The note that FIFO file ``where`` is compared by position, not slice by slice
    (:func:`_fifo_slices`: ``why``): an added or removed record there reads as changes of
    every record after it (docs/CLI.md "diff")."""
    return (f"{name(where)} compared record by record by position, not by the rank "
            f"manifests' fifo slices: {escape_controls(why)}")


def recompressed_note(neff: str, name: Callable[[str], str] = str) -> str:
    """The note beside the difference of two rewritten NEFFs whose members all hold the same
    bytes while their payloads' bytes differ (docs/FORMATS.md §9)."""
    return (f"{name(neff)}: every member holds the same bytes, the payload's differ: the same "
            "members compressed otherwise (another deflate implementation or version, "
            "docs/FORMATS.md §9), or another tar layout of them")


#: Bytes compared at a time: two output folders of any size are compared in this much memory
#: (plus the decoded differing records), not whole files (a 128-rank HIER rank: 650 MB).
CHUNK_BYTES = 16 << 20


def _open_regular(p: Path):
    """``p`` opened as :func:`~nrtrewrite.artifacts.open_regular` does, never through a link
    (``diff`` follows none)."""
    return open_regular(p, follow_links=False)


def _manifest_size(size: int) -> int:
    """``size``, a manifest's, when it may be read: one over
    :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES` is :class:`_Unread`."""
    if (why := F.manifest_size_refusal(size)) is not None:
        raise _Unread(why)
    return size


def _read_whole(p: Path) -> bytes:
    """The bytes of the regular file ``p`` (a manifest), opened as :func:`_open_regular`,
    of at most :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES`: a larger one is refused
    from its size before any byte of it is read, and one that grows while it is read is
    refused too (:class:`_Unread`)."""
    with _open_regular(p) as fh:
        size = _manifest_size(os.fstat(fh.fileno()).st_size)
        data = fh.read(size + 1)
    if len(data) > size:
        raise _Unread(f"changed while being read (it held {size} bytes, now more)")
    return data


def _same_bytes(fa: Path, fb: Path) -> bool:
    """Whether two files hold the same bytes, read :data:`CHUNK_BYTES` at a time (False if
    either cannot be read: the caller's reading then names the file and the error)."""
    try:
        if not (fa.is_file() and fb.is_file()):  # a FIFO would block the open
            return False
        if fa.stat().st_size != fb.stat().st_size:
            return False
        with _open_regular(fa) as ha, _open_regular(fb) as hb:
            return _same_blocks(ha, hb)
    except OSError:
        return False


def _same_blocks(ha, hb, nbytes: int | None = None) -> bool:
    """Whether the open files ``ha`` and ``hb`` read the same bytes from where they stand,
    :data:`CHUNK_BYTES` at a time: the next ``nbytes`` (a read the end cuts short counts as
    read: it is compared as it came), or all of them to the end of both (None)."""
    while nbytes is None or nbytes > 0:
        n = CHUNK_BYTES if nbytes is None else min(nbytes, CHUNK_BYTES)
        x = ha.read(n)
        if x != hb.read(n):
            return False
        if nbytes is None:
            if not x:
                return True
        else:
            nbytes -= n
    return True


def _leaf_fields(dtype: np.dtype, prefix: str = "") -> list[tuple[str, tuple[str, ...]]]:
    """``(shown name, key path)`` of every leaf field of a structured dtype, in order."""
    out = []
    for name in dtype.names:
        sub = dtype.fields[name][0]
        if sub.names:
            out += [(f"{name}.{n}", (name, *keys)) for n, keys in _leaf_fields(sub)]
        else:
            out.append((name, (name,)))
    return out


def _column(x: np.ndarray, keys: tuple[str, ...]) -> np.ndarray:
    for k in keys:
        x = x[k]
    return x


def _record_lines(where: str, name: str, i: int, ra: np.void, rb: np.void,
                  channel: int | None = None, block: int | None = None) -> list[Difference]:
    """The differing decoded fields of record ``i`` (both decodings' fields: a spad entry's
    bytes 4..7 are named by its algo_type); ``raw`` with both records' hex if none differs
    (every byte is in a named field: a backstop, never a silent record)."""
    da, db = decode_record(name, ra), decode_record(name, rb)
    out = []
    for key in list(da) + [k for k in db if k not in da]:
        va, vb = da.get(key, ABSENT), db.get(key, ABSENT)
        if va != vb:
            out.append(Difference(where, i, key, va, vb, channel=channel, block=block))
    if not out:
        out.append(Difference(where, i, "raw", ra.tobytes().hex(), rb.tobytes().hex(),
                              channel=channel, block=block))
    return out


#: Differing records whose lines :func:`record_line_texts` makes at a time (bounded memory).
RECORDS_BLOCK = 1 << 14


def _neq_columns(ca: dict, cb: dict) -> np.ndarray:
    """(record, key) -> whether the key's values differ, for two ``decode_columns`` column
    sets of the same keys (an array field differs where any of its elements does)."""
    neq = np.empty((len(next(iter(ca.values()))), len(ca)), bool)
    for k, key in enumerate(ca):
        d = ca[key] != cb[key]
        neq[:, k] = d.any(axis=1) if d.ndim > 1 else d
    return neq


def record_line_texts(index: int, where: str, name: str, recs: np.ndarray, xa: np.ndarray,
                      xb: np.ndarray, as_json: bool = False,
                      escape: Callable[[str], str] = str,
                      channel: int | None = None,
                      blocks: np.ndarray | None = None) -> list[str] | None:
    """The lines of differing records (record ``recs[j]``: ``xa[j]`` in A, ``xb[j]`` in B;
    difference ``index + j``) as text, exactly as :func:`_record_lines`' lines would be
    written: ``escape_line(line.line(escape))`` for each :class:`Difference`, or with
    ``as_json`` ``json.dumps({"index": ..., **to_json()})``.  ``escape`` shows the name
    ``where`` (``errors.escape_controls``); the rest is guarded (``errors.escape_line``),
    character by character, as the line's parts.  Made column by
    column (``decode_columns``) with one format string per field, not a decoded dict per
    record.  None where the record-at-a-time path is needed: records decoded with other
    keys in A and B (spad.bin's ring and mesh-overlay entries), or a record none of whose
    decoded fields differs (its ``raw`` line).  ``channel``, ``blocks``: as
    :meth:`Report.add_records`'."""
    ga, gb = decode_columns(name, xa), decode_columns(name, xb)
    if len(ga) != 1 or len(gb) != 1:  # (one group: the same keys on both sides)
        return None
    ca, cb = ga[0][1], gb[0][1]
    neq = _neq_columns(ca, cb)
    if not neq.any(axis=1).all():
        return None
    nkeys = neq.shape[1]
    flat = neq.ravel()  # record-major: each record's lines in its keys' order
    line_of = np.cumsum(flat) - 1
    out = np.empty(int(line_of[-1]) + 1, object)
    numbers = (np.arange(len(recs)) + index) if as_json else None
    name_text = (lambda v: escape_line(json.dumps(v) if as_json else repr(v)))
    at = "" if channel is None else f" (channel {int(channel)}" + (
        ")" if blocks is None else ", block %d)")
    also = "" if channel is None else f', "channel": {int(channel)}' + (
        "" if blocks is None else ', "block": %d')
    for k, key in enumerate(ca):
        rows = np.flatnonzero(neq[:, k])
        if not len(rows):
            continue
        # values as _fmt (hex addresses, repr'd names) or json.dumps writes them; numbers
        # have no character escape changes
        hx = not as_json and ":" not in where and key in HEX_FIELDS
        va = column_texts(ca[key][rows], hx, name_text)
        vb = column_texts(cb[key][rows], hx, name_text)
        if as_json:
            fmt = ('{"index": %d, "where": ' + json.dumps(where).replace("%", "%%")
                   + ', "record": %d, "field": ' + json.dumps(key).replace("%", "%%")
                   + ', "path": ' + json.dumps(key.split(".")).replace("%", "%%")
                   + ', "a": %s, "b": %s, "a_present": true, "b_present": true' + also + '}')
            cols = [numbers[rows].tolist(), recs[rows].tolist(), va, vb]
            if blocks is not None:
                cols.append(np.asarray(blocks)[rows].tolist())
            texts = [fmt % t for t in zip(*cols)]
        else:
            fmt = (escape(where).replace("%", "%%") + "[%d]" + at + " "
                   + escape_line(key).replace("%", "%%") + ": %s != %s")
            cols = [recs[rows].tolist()]
            if blocks is not None:
                cols.append(np.asarray(blocks)[rows].tolist())
            texts = [fmt % t for t in zip(*cols, va, vb)]
        out[line_of[rows * nkeys + k]] = texts
    return out.tolist()


def _read_block(fh, buf: bytearray, nbytes: int, path: Path) -> memoryview:
    view = memoryview(buf)[:nbytes]
    got = 0
    while got < nbytes:
        n = fh.readinto(view[got:])
        if not n:
            raise OutputError(f"{escape_path(path)}: cannot read (it shrank while being "
                              "compared)")
        got += n
    return view


#: A FIFO slice lined up on both sides (:func:`_fifo_slices`): its channel, its first record
#: and count in A, in B.
FifoSlice = tuple[int, int, int, int, int]


def _records_diff(rep: Report, where: str, name: str, fa: Path, fb: Path,
                  na: int, nb: int, slices: list[FifoSlice] | None = None,
                  ops: list[FifoSlice] | None = None) -> None:
    """Compare the first ``min(na, nb)`` records of two artifact files, a block of
    :data:`CHUNK_BYTES` at a time read into two reused buffers (memory stays two blocks
    whatever the files' size): differing records are found and their raw fields counted with
    numpy, and only the records :class:`Report` still shows are decoded.  With ``slices``
    (a FIFO file's channels lined up, :func:`_fifo_slices`) slice by slice instead: each
    slice's records in common (the first ``min`` of its two counts) record by record, named
    by A's index and (a net_src.bin or net_dest.bin record) the channel, then each record
    past them on one side only, one difference (``added``: B's, named by B's index;
    ``removed``: A's), and a count line per slice that differs (:class:`FileCount` with its
    ``channel``); no ``records`` line (the added and removed records stand for it).  ``ops``:
    the ``net_ops.bin`` slices of the same channels, which name a ``net_src.bin`` or
    ``net_dest.bin`` record's block (:func:`_slice_blocks`)."""
    dtype = F.ARTIFACTS[name][0]
    size = dtype.itemsize
    if slices is None:
        if na != nb:
            rep.add([Difference(where, None, "records", na, nb)])
        slices = [(None, 0, min(na, nb), 0, min(na, nb))]
    leaves = _leaf_fields(dtype)
    step = max(1, CHUNK_BYTES // size)
    most = max((min(ca, cb) for _, _, ca, _, cb in slices), default=0)
    bufa, bufb = bytearray(min(most, step) * size), bytearray(min(most, step) * size)
    try:
        ha = _open_regular(fa)
    except OSError as exc:
        raise _cannot_read(fa, exc) from None
    with ha:
        try:
            hb = _open_regular(fb)
        except OSError as exc:  # B's damage: its line, no records compared
            rep.add([_damaged(where, _why(exc))])
            return
        with hb:
            broken = False  # (B's damage met: nothing more compared, the counts still said)
            for k_slice, (ch, a0, ca, b0, cb) in enumerate(slices):
                if broken:
                    break
                fc = (FileCount(where, na, nb) if ch is None
                      else FileCount(where, ca, cb, channel=ch))
                fc.fields = {shown: 0 for shown, _ in leaves}
                # (a net_ops.bin record holds its channel, enc_channel: its lines name none)
                named = None if name == "net_ops.bin" else ch
                # (each side's blocks read once a record of the slice is shown: a pass over
                # the slice's marks, none where nothing of it differs)
                blk_a = blk_b = lambda: None
                if named is not None and ops is not None:
                    _, oa0, oan, ob0, obn = ops[k_slice]
                    blk_a = functools.cache(lambda oa0=oa0, oan=oan, a0=a0, ca=ca:
                                            _slice_blocks(fa, name, oa0, oan, a0, ca))
                    blk_b = functools.cache(lambda ob0=ob0, obn=obn, b0=b0, cb=cb:
                                            _slice_blocks(fb, name, ob0, obn, b0, cb))
                n = min(ca, cb)
                ha.seek(a0 * size)
                hb.seek(b0 * size)
                for lo in range(0, n, step):
                    k = min(step, n - lo)
                    pair = _read_pair(rep, where, fa,
                                      lambda: _read_block(ha, bufa, k * size, fa),
                                      lambda: _read_block(hb, bufb, k * size, fb))
                    if pair is None:  # B's damage: the records before it stay compared
                        broken = True
                        break
                    va, vb = pair
                    if va == vb:
                        continue
                    # every record size is a multiple of 8 bytes: compare 64-bit words
                    wa = np.frombuffer(va, "<u8").reshape(k, size // 8)
                    wb = np.frombuffer(vb, "<u8").reshape(k, size // 8)
                    idx = np.flatnonzero((wa != wb).any(axis=1))
                    xa = np.frombuffer(va, dtype)[idx]  # (copies of the differing records)
                    xb = np.frombuffer(vb, dtype)[idx]
                    for shown, keys in leaves:
                        neq = _column(xa, keys) != _column(xb, keys)
                        if neq.ndim > 1:
                            neq = neq.reshape(len(idx), -1).any(axis=1)
                        fc.fields[shown] += int(np.count_nonzero(neq))
                    fc.differing_records += len(idx)
                    room = rep.room()
                    blocks = blk_a() if room is None or room > 0 else None
                    rep.add_records(where, name, a0 + lo + idx, xa, xb, named,
                                    None if blocks is None else blocks[lo + idx])
                    del wa, wb, va, vb
                if ch is not None and ca != cb and not broken:  # (one side's past the other's)
                    fc.added, fc.removed = max(0, cb - ca), max(0, ca - cb)
                    h, f0, side, blk = ((hb, b0, "added", blk_b) if cb > ca
                                        else (ha, a0, "removed", blk_a))
                    rep.add_first(abs(cb - ca), lambda j, h=h, f0=f0, side=side, ch=named,
                                  blk=blk: _one_sided(where, name, dtype, h, f0 + n + j, side,
                                                      ch, None if blk() is None else
                                                      int(blk()[n + j])))
                if fc.differing_records or fc.added or fc.removed:
                    with rep.atomic():
                        rep.on_file(fc)


def _one_sided(where: str, name: str, dtype: np.dtype, fh, i: int, side: str,
               channel: int | None, block: int | None = None) -> list[Difference]:
    """The line of record ``i`` of the open file ``fh`` (B's when ``side`` is ``added``, A's
    when ``removed``), which the other side's slice of ``channel`` has no record for: its
    decoded fields (:func:`~nrtrewrite.artifacts.decode_record`)."""
    size = dtype.itemsize
    try:
        fh.seek(i * size)
        raw = fh.read(size)
    except OSError as exc:
        if side == "removed":  # (A, the reference)
            raise OutputError(f"{where}: cannot read ({_why(exc)})") from None
        return [_damaged(where, _why(exc))]
    if len(raw) != size:
        why = "cannot read (it shrank while being compared)"
        if side == "removed":
            raise OutputError(f"{where}: {why}")
        return [_damaged(where, why)]
    d = decode_record(name, np.frombuffer(raw, dtype)[0])
    return [Difference(where, i, side, d if side == "removed" else ABSENT,
                       d if side == "added" else ABSENT, channel=channel, block=block)]


def _slice_blocks(path: Path, name: str, o0: int, on: int, first: int, count: int
                  ) -> np.ndarray | None:
    """The block of each record of the ``[first, first + count)`` slice of FIFO address file
    ``path`` (``net_src.bin`` or ``net_dest.bin``, ``name``), whose channel's ops are the
    ``[o0, o0 + on)`` slice of ``net_ops.bin`` beside it: the slice is one segment per basic
    block with entries in it (a run of the channel's ops of one ``basic_block_id`` whose
    ``tx_entry_cnt``, for ``rx_entry_cnt``, is not all 0), in order, each ending with its
    EXEC_COMPLETE record (FORMATS §8 "Basic blocks"), and a record's block is that block's
    ``basic_block_id``, as ``dump`` shows the ops'.  None when the slice is not split so (its
    EXEC_COMPLETE records not one per such block, the last record not one) or a file cannot
    be read: the lines then name no block."""
    cnt = "tx_entry_cnt" if name == "net_src.bin" else "rx_entry_cnt"
    try:
        ops = _read_slice(path.parent / "net_ops.bin", "net_ops.bin", o0, on,
                          ("basic_block_id", cnt))
        recs = _read_slice(path, name, first, count, ("mark",))
    except OSError:
        return None
    if ops is None or recs is None or not count:
        return None
    bb, counts = ops["basic_block_id"], ops[cnt]
    starts = np.flatnonzero(np.append(True, bb[1:] != bb[:-1])) if on else np.zeros(0, int)
    with_entries = [int(bb[a]) for a, b in zip(starts, np.append(starts[1:], on))
                    if counts[a:b].any()]
    stops = recs["mark"] == int(NetAddrMark.EXEC_COMPLETE)
    if int(stops.sum()) != len(with_entries) or not stops[-1]:
        return None
    seg = np.cumsum(stops) - stops  # (each record's segment: EXEC_COMPLETEs before it)
    return np.asarray(with_entries, np.int64)[seg]


def _read_slice(path: Path, name: str, first: int, count: int, fields: tuple[str, ...]
                ) -> dict[str, np.ndarray] | None:
    """The ``fields`` columns of records ``[first, first + count)`` of artifact ``path``, read
    :data:`CHUNK_BYTES` at a time (only the columns held); None: the file is shorter."""
    dtype = F.ARTIFACTS[name][0]
    size = dtype.itemsize
    cols = {f: np.empty(count, dtype[f]) for f in fields}
    step = max(1, CHUNK_BYTES // size)
    with _open_regular(path) as fh:
        fh.seek(first * size)
        for lo in range(0, count, step):
            k = min(step, count - lo)
            raw = fh.read(k * size)
            if len(raw) != k * size:
                return None
            block = np.frombuffer(raw, dtype)
            for f in fields:
                cols[f][lo:lo + k] = block[f]
    return cols


#: The FIFO files compared slice by slice when both rank manifests' ``fifo`` slices are valid
#: and name the same channels (FORMATS §1.2, §8): the key of each file's slice.
FIFO_KEYS = {"net_ops.bin": "ops", "net_src.bin": "src", "net_dest.bin": "dest"}


def _fifo_slices(ra: Path, rb: Path) -> dict[str, list[FifoSlice]] | str:
    """Rank folders ``ra`` and ``rb``'s FIFO files lined up by their manifests' ``fifo``
    slices, per file name (:data:`FIFO_KEYS`) the slices of each channel in A and B; or why
    they cannot be (compared by position then): a manifest or its ``fifo`` that cannot be
    read or is not of its form, slices that do not tile the files as ``simulate`` checks
    (:func:`~nrtrewrite.simulate.artifacts.check_fifo_slices`), or other channels on the
    two sides."""
    from nrtrewrite.simulate.artifacts import check_fifo_slices, read_rank_fifo
    got = []
    for side, rdir in (("A", ra), ("B", rb)):
        try:
            fifo = read_rank_fifo(rdir)
            records = {}
            for fname in FIFO_KEYS:
                n, why = _artifact_records(rdir / fname, fname)
                if why:
                    return f"{side}'s {fname}: {why}"
                records[fname] = n
            check_fifo_slices(fifo, records)
        except NrtRewriteError as err:
            return f"{side}'s fifo slices: {err.line()}"
        got.append(fifo)
    fa, fb = got
    if [ch for ch, _ in fa] != [ch for ch, _ in fb]:
        return (f"the fifo slices are of other channels, A's {[ch for ch, _ in fa]}, B's "
                f"{[ch for ch, _ in fb]}")
    return {fname: [(ch, *sa[k], *sb[k]) for (ch, sa), (_, sb) in zip(fa, fb)]
            for k, fname in enumerate(FIFO_KEYS)}


def _artifact_records(p: Path, name: str) -> tuple[int | None, str | None]:
    """The whole records in artifact ``p`` and what is wrong with it (None: nothing): not a
    regular file or unreadable (None records: not compared), a torn last record (the whole
    ones)."""
    size = F.ARTIFACTS[name][0].itemsize
    try:
        st = os.lstat(p)  # (a FIFO is never opened: it would block; a link not followed)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        nbytes = st.st_size
        with _open_regular(p):
            pass
    except OSError as exc:
        return None, _why(exc)
    if nbytes % size:
        return nbytes // size, f"{nbytes} bytes is not a whole number of {size}-byte records"
    return nbytes // size, None


def _header_value(name: str, raw: bytes):
    """A NEFF header field's value as shown: text for the string fields, hex for the byte
    fields, else the little-endian integer."""
    if name in STRING_FIELDS:
        return raw.rstrip(b"\0").decode("utf-8", "backslashreplace")
    if len(raw) in (1, 2, 4, 8) and name not in BYTES_FIELDS:
        return int.from_bytes(raw, "little")
    return raw.hex()


def _byte_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of True in a 1-D bool array."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask.view(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


#: A TOPSP_KICK word's fields after the common header (docs/FORMATS.md §9,
#: ``F.KICK_DTYPE``): ``spad_index``, ``word``, ``trigger``; ``reserved_20`` (bytes 20..63)
#: is compared as byte runs.
KICK_FIELDS = [n for n in F.KICK_DTYPE.names
               if F.KICK_DTYPE.fields[n][1] >= INSTR_HEADER_DTYPE.itemsize
               and not n.startswith("reserved")]
#: The end of a TOPSP_KICK word's fields: its reserved bytes' first, byte 20.
KICK_FIELDS_END = F.KICK_DTYPE.fields["reserved_20"][1]
#: A TOPSP_KICK word's opcode and ``length_dw`` (docs/FORMATS.md §9).
KICK_OPCODE, KICK_LENGTH_DW = F.TOPSP_KICK_OPCODE, LENGTH_DW


def manifest_kick_indices(doc) -> dict[str, set[int]]:
    """The instruction words a top-level manifest names as TOPSP_KICK words (docs/FORMATS.md
    §9: a kick word is told by the manifest, not by its bytes): member ``SUBGRAPH/ENGINE.bin``
    -> indices, each trigger's ``index`` and, for a former 0xD9+0xDA pair (a trigger whose
    ``src`` has an ``ap``), the word after it.  A trigger not of that form (a damaged
    manifest) names none."""
    out: dict[str, set[int]] = {}
    triggers = doc.get("triggers") if isinstance(doc, dict) else None
    for t in triggers if isinstance(triggers, list) else ():
        if not isinstance(t, dict):
            continue
        sg, engine, index, src = t.get("subgraph"), t.get("engine"), t.get("index"), t.get("src")
        if not (isinstance(sg, str) and isinstance(engine, str) and type(index) is int
                and index >= 0):
            continue
        words = 2 if isinstance(src, dict) and src.get("ap") is not None else 1
        out.setdefault(f"{sg}/{engine}.bin", set()).update(range(index, index + words))
    return out


def _is_kick(w: bytes) -> bool:
    """Whether word ``w`` has a TOPSP_KICK word's opcode and ``length_dw``."""
    return w[0] == KICK_OPCODE and w[1] == KICK_LENGTH_DW


def _instruction_lines(where: str, i: int, wa: bytes, wb: bytes,
                       kick: bool = False) -> list[Difference]:
    """The differing fields of instruction ``i`` of a stream: the common header's fields by
    name (``INSTR_WORD_DTYPE``), the operand bytes as runs ``bytes[16:24]`` in hex.  With
    ``kick`` (both manifests name the word a TOPSP_KICK word) and both words of its opcode and
    ``length_dw``, the kick's fields by name too (:data:`KICK_FIELDS`), its reserved
    bytes 20..63 as runs named as FORMATS §9 names them, ``reserved[30:31]`` (the word's
    offsets, as ``bytes[...]``).  The header's bytes 2..3 are ``reserved_2``, the name the
    reader's messages and ``assemble``'s ``patch`` give them (FORMATS §9)."""
    ra, rb = (np.frombuffer(w, INSTR_WORD_DTYPE)[0] for w in (wa, wb))
    out = [Difference(where, i, f, int(ra[f]), int(rb[f]))
           for f in INSTR_HEADER_DTYPE.names if ra[f] != rb[f]]
    ua, ub = np.frombuffer(wa, np.uint8), np.frombuffer(wb, np.uint8)
    hdr, runs = INSTR_HEADER_DTYPE.itemsize, "bytes"
    if kick and _is_kick(wa) and _is_kick(wb):
        ka, kb = (np.frombuffer(w, F.KICK_DTYPE)[0] for w in (wa, wb))
        out += [Difference(where, i, f, int(ka[f]), int(kb[f]))
                for f in KICK_FIELDS if ka[f] != kb[f]]
        hdr, runs = KICK_FIELDS_END, "reserved"  # (its reserved bytes as runs)
    for lo, hi in _byte_runs(ua[hdr:] != ub[hdr:]):
        out.append(Difference(where, i, f"{runs}[{hdr + lo}:{hdr + hi}]",
                              wa[hdr + lo:hdr + hi].hex(), wb[hdr + lo:hdr + hi].hex()))
    return out


def _member_diff(rep: Report, where: str, ma: bytes, mb: bytes,
                 kicks: set[int] | frozenset = frozenset()) -> None:
    """One member of both NEFFs: a JSON member key by key, an instruction stream (``.bin``,
    whole 64-byte instructions) instruction by instruction (``kicks``: the indices both
    manifests name TOPSP_KICK words, :func:`_instruction_lines`), anything else by its
    differing bytes (count and first offset)."""
    if where.endswith(".json"):
        try:
            # (unique_keys: a key given twice, at any level, on either side, is compared by
            # its bytes, as docs/CLI.md says; until 2026-12-07 the last value was kept, so
            # {"v": 7, "v": 1} against {"v": 1} was "the same JSON in other bytes", a note)
            ja = jsonin.loads(ma, strict_objects=False, unique_keys=True, exact_floats=True)
            jb = jsonin.loads(mb, strict_objects=False, unique_keys=True, exact_floats=True)
        except (ValueError, RecursionError):  # compared by bytes (NaN != NaN, keys twice)
            pass
        else:
            before = rep.count
            rep.add_values(where, _json_diff(where, ja, jb),
                           isinstance(ja, dict) and isinstance(jb, dict))
            if rep.count == before:  # the same JSON in other bytes: its layout (as the top
                # manifest's, a note; --strict, a difference)
                _layout(rep, [Difference(where, None, LAYOUT_FIELD,
                                         hashlib.sha256(ma).hexdigest(),
                                         hashlib.sha256(mb).hexdigest(), ("sha256",))])
            return
    n = min(len(ma), len(mb))
    if where.endswith(".bin") and not len(ma) % WORD_SIZE and not len(mb) % WORD_SIZE:
        if len(ma) != len(mb):
            rep.add([Difference(where, None, "instructions", len(ma) // WORD_SIZE,
                                len(mb) // WORD_SIZE)])
        wa = np.frombuffer(ma, "<u8", count=n // 8).reshape(-1, WORD_SIZE // 8)
        wb = np.frombuffer(mb, "<u8", count=n // 8).reshape(-1, WORD_SIZE // 8)
        rows = np.flatnonzero((wa != wb).any(axis=1))
        idx = rows.tolist()

        def lines_of(j: int) -> list[Difference]:
            o = idx[j] * WORD_SIZE
            return _instruction_lines(where, idx[j], ma[o:o + WORD_SIZE], mb[o:o + WORD_SIZE],
                                      idx[j] in kicks)

        rep.add_first(len(idx), lines_of)
        if idx:  # its count, whatever --max, as an artifact's (its raw fields: the header's
            # and the operand bytes)
            xa = np.frombuffer(ma, INSTR_WORD_DTYPE, count=n // WORD_SIZE)[rows]
            xb = np.frombuffer(mb, INSTR_WORD_DTYPE, count=n // WORD_SIZE)[rows]
            fields = {f: int(np.count_nonzero(xa[f] != xb[f])) for f in INSTR_HEADER_DTYPE.names}
            hdr = INSTR_HEADER_DTYPE.itemsize
            ua = np.frombuffer(ma, np.uint8, count=n).reshape(-1, WORD_SIZE)[rows, hdr:]
            ub = np.frombuffer(mb, np.uint8, count=n).reshape(-1, WORD_SIZE)[rows, hdr:]
            fields["operands"] = int(np.count_nonzero((ua != ub).any(axis=1)))
            with rep.atomic():
                rep.on_file(FileCount(where, len(ma) // WORD_SIZE, len(mb) // WORD_SIZE,
                                      len(idx), fields, "instructions"))
        return
    if len(ma) != len(mb):
        rep.add([Difference(where, None, "bytes", len(ma), len(mb))])
    k, first = _differing_bytes(ma, mb)
    if k:
        rep.add([Difference(where, None, f"{counted(k, 'differing byte')}, the first at "
                            f"offset 0x{first:x}", ma[first], mb[first])])


#: Differences found in the NEFFs' members, held until both NEFFs have been read whole (the
#: reader's error in either, even after its last member, reports none of them: A's is an
#: error, B's the one ``damaged`` line); past this many, the NEFFs are read once through to
#: check them and then compared again, each difference reported as it is found.
DEFER_MAX = 10_000
#: Bytes of B's members held while A's order is followed: a member B has before A asks for
#: it (another order, or a member A does not have) is held; past this, as its size and
#: sha256 only, and read again from B if A's member differs.
HOLD_BYTES = 64 << 20

_SAME = object()  # B's member held by its digest, which A's has


class _Overflow(Exception):
    """More than :data:`DEFER_MAX` differences of the members to hold."""


class _Damaged(Exception):
    """B's NEFF cannot be read: ``why`` is the reader's line."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class _Deferred(Report):
    """The differences of the members, held for ``rep`` (the ones it would show, and the
    count of the others) until :meth:`flush`, with the notes of JSON members in another
    layout (``rep``'s ``strict`` kept: then they are differences); :class:`_Overflow` past
    ``most`` differences held."""

    def __init__(self, rep: Report, most: int):
        super().__init__(rep.room(), self._keep, on_file=self._file, strict=rep.strict,
                         on_layout=self._note, on_values=self._values)
        self.rep, self.most, self.held, self.kept = rep, most, [], 0

    def _keep(self, index: int, lines: list[Difference]) -> None:
        if self.kept >= self.most:
            raise _Overflow
        self.held.append(("difference", lines))
        self.kept += 1

    def _note(self, lines: list[Difference]) -> None:
        self.held.append(("layout", lines))

    def _file(self, fc: FileCount) -> None:
        self.held.append(("file", fc))

    def _values(self, vc: ValueCount) -> None:
        self.held.append(("values", vc))

    def flush(self) -> None:
        # the shown differences are the first ones: replayed in order, rep shows them all
        # (with the notes and the members' count lines where they came), then the others
        # counted
        for kind, item in self.held:
            if kind == "difference":
                self.rep.add(item)
            else:
                with self.rep.atomic():
                    {"layout": self.rep.on_layout, "file": self.rep.on_file,
                     "values": self.rep.on_values}[kind](item)
        self.rep.add_many(self.count - self.shown)
        self.held, self.kept = [], 0


def _drain(walk: Iterator) -> None:
    """Walk to the end, holding nothing (the reader's checks of the rest: an error raised)."""
    for item in walk:
        del item


class _NeffFile:
    """A rewritten NEFF read through the project's reader (its limits and refusals; hash not
    verified) one member at a time: the file read by position as a walk goes
    (:class:`~nrtrewrite.neff.container.FileBytes`), so a walk holds one member, not the
    file nor the members read before.  Not memory-mapped: a mapped NEFF truncated by
    another process meanwhile ended ``diff`` with SIGBUS and no message; a short read is
    the reader's error now (damage in B, an error in A)."""

    def __init__(self, p: Path):
        self.path = p
        self.fh = _open_regular(p)
        try:
            self.size = os.fstat(self.fh.fileno()).st_size
        except BaseException:
            self.fh.close()
            raise
        self.walks: list = []

    def walk(self) -> Iterator[tuple[str, bytes]]:
        """``(name, data)`` of each member in archive order (the header's error raised now,
        the payload's from the walk).  A file over the reader's ``max_file_bytes`` is refused
        from its size, as ``read_file_bytes`` refuses it, before any byte of it is read."""
        from nrtrewrite.neff.container import FileBytes, Limits, stream_container
        where = Where(file=str(self.path))
        limits = Limits()
        if self.size > limits.max_file_bytes:
            raise LimitError(f"file of {self.size} bytes exceeds the limit of "
                             f"{limits.max_file_bytes} bytes (MAX_FILE_BYTES)", where)
        data = FileBytes(self.fh.fileno(), self.size, where)
        _, _, members = stream_container(data, path=str(self.path), verify_hash=False,
                                         limits=limits)
        self.walks.append(members)
        return members

    def stop(self) -> None:
        """End the walks (a paused walk holds the member it handed over last)."""
        for w in self.walks:
            w.close()
        self.walks = []

    def close(self) -> None:
        self.stop()
        self.fh.close()


class _BMembers:
    """B's members looked up in A's order, B read forward as far as each needs: a member B
    has before A asks for it is held (its bytes up to :data:`HOLD_BYTES` in all, past that
    its size and sha256, and read again by a second walk if A's member differs); a reader's
    error in B is :class:`_Damaged`."""

    def __init__(self, f: _NeffFile):
        self.f = f
        try:
            self.walk = f.walk()
        except NrtRewriteError as err:
            raise _Damaged(err.line()) from None
        self.read = 0  # members the walk has handed over
        self.ended = False
        self.held: dict[str, tuple[int, bytes | None, int, bytes | None]] = {}
        self.kept = 0  # bytes held
        self.again: list | None = None  # [second walk, members it has handed over]

    @staticmethod
    def _next(walk: Iterator) -> tuple[str, bytes] | None:
        try:
            return next(walk, None)
        except NrtRewriteError as err:
            raise _Damaged(err.line()) from None

    def find(self, name: str, xa: bytes):
        """B's member ``name``: its bytes, :data:`_SAME` (held by its digest, which ``xa``,
        A's, has), or None when B has none."""
        if name in self.held:
            index, data, size, digest = self.held.pop(name)
            if data is not None:
                self.kept -= size
                return data
            if size == len(xa) and hashlib.sha256(xa).digest() == digest:
                return _SAME
            return self._again(name, index)
        while not self.ended:
            got = self._next(self.walk)
            if got is None:
                self.ended = True
                break
            self.read += 1
            if got[0] == name:
                return got[1]
            mb, xb = got
            del got
            if self.kept + len(xb) <= HOLD_BYTES:
                self.held[mb] = (self.read - 1, xb, len(xb), None)
                self.kept += len(xb)
            else:
                self.held[mb] = (self.read - 1, None, len(xb), hashlib.sha256(xb).digest())
            del xb
        return None

    def _again(self, name: str, index: int) -> bytes:
        """Member ``index`` of B, ``name``, read again (a second walk, restarted only when
        a member before the one it reached last is asked for)."""
        if self.again is None or self.again[1] > index:
            if self.again is not None:
                self.again[0].close()
            try:
                self.again = [self.f.walk(), 0]
            except NrtRewriteError as err:
                raise _Damaged(err.line()) from None
        while True:
            got = self._next(self.again[0])
            self.again[1] += 1
            if got is not None and self.again[1] - 1 < index:
                del got
                continue
            if got is None or got[0] != name:
                raise OutputError(f"{escape_path(self.f.path)}: cannot read (it changed while "
                                  "being compared)")
            return got[1]

    def rest(self) -> Iterator[str]:
        """The names of B's members A has not asked for, in B's order (B read to its end)."""
        names = list(self.held)
        self.held, self.kept = {}, 0
        yield from names
        while not self.ended:
            got = self._next(self.walk)
            if got is None:
                self.ended = True
                break
            name = got[0]
            del got
            yield name

    def close(self) -> None:
        self.held, self.kept = {}, 0
        self.f.stop()


def _walk_members(rep: Report, name: str, fa: _NeffFile, fb: _NeffFile,
                  kicks: dict[str, set[int]] | None = None,
                  other: list | None = None) -> str | None:
    """Compare the members of NEFFs ``fa`` (A) and ``fb`` (B) in step, A's in archive order,
    then B's that A does not have in B's (:class:`_BMembers`): one member of each side at a
    time when both have the same members in the same order.  Returns B's reader error line
    (A then read to its end) or None; A's error is raised.  ``other`` gets an item for each
    member of other bytes or on one side only."""
    other = [] if other is None else other
    wa = fa.walk()  # the reference: its error raised
    try:
        b = _BMembers(fb)
    except _Damaged as err:
        why = err.why
    else:
        try:
            _in_step(rep, name, wa, b, kicks or {}, other)
            return None
        except _Damaged as err:  # (A's member last handed over went with _in_step's frame:
            # not held while A is read to its end)
            why = err.why
        finally:
            b.close()
    _drain(wa)
    return why


def _in_step(rep: Report, name: str, wa: Iterator[tuple[str, bytes]], b: _BMembers,
             kicks: dict[str, set[int]], other: list) -> None:
    """:func:`_walk_members`' comparison: A's members from walk ``wa`` each against B's of
    that name, then B's that A does not have.  Its own function so that the members it
    holds go with its frame, whatever it raises (B's :class:`_Damaged`)."""
    for member, xa in wa:
        xb = b.find(member, xa)
        where = f"{name}:{member}"
        if xb is None:
            other.append(member)
            rep.add([Difference(where, None, "member", True, False)])
        elif xb is not _SAME and xb != xa:
            other.append(member)
            _member_diff(rep, where, xa, xb, kicks.get(member, frozenset()))
        del xa, xb  # (not held while the next members are decompressed)
    for member in b.rest():
        other.append(member)
        rep.add([Difference(f"{name}:{member}", None, "member", False, True)])


def _neff_members_diff(rep: Report, name: str, a: Path, b: Path,
                       kicks: dict[str, set[int]] | None = None) -> bool:
    """The members of the rewritten NEFFs (:func:`_walk_members`, ``kicks`` its kick words),
    reported only once both NEFFs have read whole: A's reader error raised, B's the one
    ``damaged`` line.  Returns whether every member holds the same bytes on both sides
    (False when B is damaged)."""
    other: list = []
    try:
        fa = _NeffFile(a)
    except OSError as exc:
        raise _cannot_read(a, exc) from None
    try:
        fb = _NeffFile(b)
    except OSError as exc:
        fa.close()
        rep.add([_damaged(name, _why(exc))])
        return False
    except BaseException:
        fa.close()
        raise
    try:
        held = _Deferred(rep, DEFER_MAX)
        try:
            why = _walk_members(held, name, fa, fb, kicks, other)
            overflow = False
        except _Overflow:
            overflow = True  # (handled below, once the walks' frames are gone)
        if not overflow:
            if why is None:
                held.flush()
        else:  # too many to hold: both NEFFs checked first, then each difference reported
            del held
            fa.stop()
            fb.stop()
            _drain(fa.walk())
            try:
                _drain(fb.walk())
            except NrtRewriteError as err:
                why = err.line()
            else:
                fa.stop()
                fb.stop()
                why = _walk_members(rep, name, fa, fb, kicks, other)
        if why is not None:
            rep.add([_damaged(name, why)])
        return why is None and not other
    finally:
        fa.close()
        fb.close()


def _neff_diff(rep: Report, name: str, a: Path, b: Path,
               kicks: dict[str, set[int]] | None = None) -> None:
    """The rewritten NEFFs: the header's fields by name, then the members by name (one on one
    side only; JSON key by key; instruction streams by instruction, ``kicks``: member -> the
    words both manifests name TOPSP_KICK words, named by their fields)."""
    if _same_bytes(a, b):
        return
    before = rep.count
    from nrtrewrite.neff.container import HEADER_FIELDS, HEADER_SIZE
    pair = _read_pair(rep, name, a, lambda: _head(a, HEADER_SIZE), lambda: _head(b, HEADER_SIZE))
    if pair is None:  # B's damage: its one line
        return
    ha, hb = pair
    # a header that is not whole is not compared field by field: the reader's line names it
    # (A's an error, B's damage), not hundreds of hex digits against <absent>
    for field_name, (off, size) in HEADER_FIELDS.items() if min(len(ha), len(hb)) == HEADER_SIZE \
            else ():
        xa, xb = ha[off:off + size], hb[off:off + size]
        if xa == xb:
            continue
        if size > _HEADER_HEX_MAX and field_name not in STRING_FIELDS:
            # reserved (468 bytes): its differing bytes, not its hex (strings: as text)
            k, first = _differing_bytes(xa, xb)
            rep.add([Difference(name, None, f"header.{field_name} ("
                                f"{counted(k, 'differing byte')}, the first at offset "
                                f"0x{off + first:x})",
                                xa[first], xb[first], ("header", field_name))])
            continue
        rep.add([Difference(name, None, f"header.{field_name}", _header_value(field_name, xa),
                            _header_value(field_name, xb), ("header", field_name))])
    if _neff_members_diff(rep, name, a, b, kicks) and not _same_payload(a, b, ha, hb):
        # every member holds the same bytes, the payloads differ (another deflate,
        # docs/FORMATS.md §9): still a difference (the bytes differ), with a note saying so
        with rep.atomic():
            rep.on_recompressed(name)
    if rep.count == before:  # the bytes differ where no field or member does (zero bytes
        # after the payload, another gzip encoding or tar layout of the same members): the
        # files' sizes and sha256, never "identical" for files of other bytes
        rep.add(_bytes_lines(name, a, b))


def _same_payload(a: Path, b: Path, ha: bytes, hb: bytes) -> bool:
    """Whether NEFFs ``a`` and ``b`` (their headers ``ha``, ``hb``) hold the same payload:
    the ``data_size`` bytes after the header (NEFF-LIKE.md §1), read :data:`CHUNK_BYTES` at a
    time."""
    from nrtrewrite.neff.container import HEADER_FIELDS, HEADER_SIZE
    off, size = HEADER_FIELDS["data_size"]
    if min(len(ha), len(hb)) < HEADER_SIZE:  # (a header cut short: its damage is the line)
        return True
    if ha[off:off + size] != hb[off:off + size]:
        return False
    left = int.from_bytes(ha[off:off + size], "little")
    try:
        with _open_regular(a) as fa, _open_regular(b) as fb:
            fa.seek(HEADER_SIZE)
            fb.seek(HEADER_SIZE)
            return _same_blocks(fa, fb, left)
    except OSError as exc:  # (both were read just before: it changed meanwhile)
        raise OutputError(f"{escape_path(exc.filename)}: {_why(exc)}") from None


def _bytes_lines(name: str, a: Path, b: Path) -> list[Difference]:
    """``NAME size: NA != NB`` (when the sizes differ) and ``NAME sha256: ... != ...``."""
    out = []
    try:
        sa, sb = a.stat().st_size, b.stat().st_size
        if sa != sb:
            out.append(Difference(name, None, "size", sa, sb))
        out.append(Difference(name, None, "sha256", _sha256(a), _sha256(b)))
    except OSError as exc:  # (both were read just before: it changed meanwhile)
        raise OutputError(f"{escape_path(exc.filename)}: {_why(exc)}") from None
    return out


def _check_ours(p: Path) -> None:
    """Refuse ``p`` unless it is an nrtrewrite output folder (a rank folder is not: diff
    compares whole outputs, docs/CLI.md): a folder that can be read, whose ``manifest.json``
    is a regular file (a link is not followed) of format ``nrtrewrite-lowered``.  A folder or
    manifest that cannot be read is an error naming it and the OS's reason, on either side:
    what cannot be read cannot be told an output folder; so is a manifest over
    :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES`, from its size, before any byte of it
    is read."""
    man = p / "manifest.json"
    try:
        _names(p)
    except OSError as exc:
        raise _cannot_read(p, exc) from None
    try:
        kind = _kind(man)
        if kind == "file":
            with _open_regular(man) as fh:
                _manifest_size(os.fstat(fh.fileno()).st_size)  # (before is_our_output reads it)
    except OSError as exc:
        raise _cannot_read(man, exc) from None
    if kind is None:
        raise OutputError(f"{escape_path(p)}: not an nrtrewrite output folder (no "
                          "manifest.json)")
    if kind != "file":
        what = {"link": "a link", "folder": "a folder"}.get(kind, "a special file")
        links = ": links are not followed" if kind == "link" else ""
        raise OutputError(f"{escape_path(p)}: not an nrtrewrite output folder (its "
                          f"manifest.json must be a regular file, not {what}{links})")
    if not is_our_output(p):
        if looks_like_rank_folder(p):
            why = "a rank folder; diff compares whole output folders"
        else:
            why = _not_ours_why(man)
        raise OutputError(f"{escape_path(p)}: not an nrtrewrite output folder ({why})")


def _not_ours_why(path: Path) -> str:
    """Why the manifest ``path`` is not one of ours: not JSON (and why), or not of our
    format.  A manifest that is JSON but for a number that is not finite (``NaN``,
    ``1e999``) or an integer of too many digits is an error naming the value by its key
    path (where known)."""
    try:
        jsonin.loads(_read_whole(path), strict_objects=False)
    except jsonin.JsonRule as err:
        raise OutputError(f"invalid JSON: {err.why}", file=str(path), field=err.path) from None
    except (ValueError, RecursionError) as exc:  # not JSON, or not UTF-8 text
        return _not_json(exc)
    except OSError as exc:  # (read just before: it changed meanwhile)
        return f"its manifest.json cannot be read: {_why(exc)}"
    # (JSON's form, as simulate and dump name a format: until 2026-12-06 Python's)
    return f"its manifest.json is not of format {json_text(FORMAT_NAME)}"


def _not_json(exc: ValueError | RecursionError) -> str:
    """Why a top-level manifest that is not JSON is no output folder's."""
    return f"its manifest.json is not JSON: {_json_why(exc)}"


def _json_why(exc: ValueError | RecursionError) -> str:
    """Why a text is not JSON: ``jsonin``'s reason, or JSON's, or ``nested too deeply``."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return exc.why if isinstance(exc, jsonin.JsonRule) else str(exc)


def _parse_json(data: bytes, strict: bool = True) -> tuple[object, str | None, str | None]:
    """A manifest's bytes as JSON: ``(doc, why, field)``, ``why`` None, or with ``strict``
    what is wrong with a key given twice (``field`` its key path) and ``doc`` what JSON reads
    (the last value of the key).  Numbers are read exactly (``jsonin.JsonFloat``).  Not JSON
    (not UTF-8 text, malformed, nested too deeply, a number that is not finite): raised
    (``jsonin.JsonRule``, ValueError, RecursionError)."""
    if strict:
        try:
            return (jsonin.loads(data, strict_objects=False, unique_keys=True,
                                 exact_floats=True), None, None)
        except jsonin.JsonRule as err:  # a key twice, or also unreadable without the rule
            doc = jsonin.loads(data, strict_objects=False, exact_floats=True)
            return doc, f"invalid JSON: {err.why}", err.path
    return jsonin.loads(data, strict_objects=False, exact_floats=True), None, None


def _read_json(path: Path, strict: bool = True) -> tuple[object, str | None, str | None]:
    """A manifest: ``(doc, why, field)``.  ``why`` None: read.  Otherwise what is wrong,
    ``field`` the key path it names (or None): with ``doc`` None it could not be read (the
    OS's reason, not JSON, nested too deeply, a number that is not finite); with ``doc`` it
    has a key twice (checked when ``strict``, :func:`_parse_json`)."""
    try:
        data = _read_whole(path)
    except OSError as exc:
        return None, _why(exc), None
    try:
        return _parse_json(data, strict)
    except (ValueError, RecursionError) as exc:  # not JSON, or not UTF-8 text
        return (None, f"invalid JSON: {_json_why(exc)}",
                exc.path if isinstance(exc, jsonin.JsonRule) else None)


def _top_manifest(p: Path, strict: bool = True) -> tuple[dict, str | None, str | None]:
    """Output folder ``p``'s ``manifest.json``, an object (:func:`_parse_json`: ``(doc, why,
    field)``, ``why`` of a key given twice).  One that cannot be read is an error naming
    it, as is a number JSON cannot carry (with its key path); one that is not JSON is
    refused as :func:`_check_ours` refuses it, ``P: not an nrtrewrite output folder (its
    manifest.json is not JSON: REASON)`` (that check knows a manifest over 1 MiB by its
    head only, ``artifacts.is_our_output``)."""
    man = p / "manifest.json"
    try:
        data = _read_whole(man)
    except OSError as exc:
        raise _cannot_read(man, exc) from None
    try:
        doc, why, fld = _parse_json(data, strict)
    except jsonin.JsonRule as err:
        raise OutputError(f"invalid JSON: {err.why}", file=str(man), field=err.path) from None
    except (ValueError, RecursionError) as exc:
        raise OutputError(f"{escape_path(p)}: not an nrtrewrite output folder "
                          f"({_not_json(exc)})") from None
    return _must_be_object(doc, p), why, fld


def _json_a(path: Path):
    """A's rank manifest (:func:`_read_json`): anything wrong with it is an error."""
    doc, why, fld = _read_json(path)
    if why is not None:
        raise OutputError(why, file=str(path), field=fld)
    return doc


def _json_b(rep: Report, where: str, path: Path):
    """B's rank manifest (:func:`_read_json`): anything wrong with it is its ``damaged`` line; the
    document (None if it could not be read)."""
    doc, why, fld = _read_json(path)
    if why is not None:
        rep.add([_damaged(where, f"field {fld}: {why}" if fld else why)])
    return doc


def _must_be_object(doc, p: Path) -> dict:
    if not isinstance(doc, dict):  # (a manifest over 1 MiB is recognised by its head only)
        raise OutputError("must be a JSON object", file=str(p / "manifest.json"))
    return doc


def _neff_name(doc: dict, p: Path) -> str | None:
    """The rewritten NEFF's file name the manifest records, as it is spelled on disk here
    (:func:`~nrtrewrite.emit.formats.name_on_disk`; None: it records none)."""
    neff = doc.get("output_neff")
    if neff is None:
        return None
    try:
        return F.name_on_disk(F.recorded_neff_name(neff))
    except ValueError as exc:
        raise OutputError(str(exc), file=str(p / "manifest.json"), field="output_neff") from None


#: What an entry is, by the file type of its mode (:func:`_kind`).
_KINDS = {stat.S_IFREG: "file", stat.S_IFDIR: "folder", stat.S_IFLNK: "link",
          stat.S_IFIFO: "fifo", stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device",
          stat.S_IFBLK: "block device"}


def _kind(p: Path) -> str | None:
    """What ``p`` is, not following a link: one of :data:`_KINDS` (file, folder, link, fifo,
    socket, character device, block device), other (a type Linux has not), or None (absent);
    an OS error other than its absence raised."""
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        return None
    return _KINDS.get(stat.S_IFMT(mode), "other")


def _kind_a(p: Path) -> str | None:
    """:func:`_kind` of A's ``p``: an error if it cannot be told."""
    try:
        return _kind(p)
    except OSError as exc:
        raise _cannot_read(p, exc) from None


def _kinds(rep: Report, where: str, pa: Path, pb: Path, in_a: bool,
           in_b: bool) -> tuple[str | None, str | None] | None:
    """The kinds (:func:`_kind`) of entry ``where`` on each side (``in_a``, ``in_b``:
    listed there; None where not), or None where B's cannot be told, its damage reported
    (``WHERE damaged in B``); A's that cannot be told is an error."""
    ka = _kind_a(pa) if in_a else None
    try:
        kb = _kind(pb) if in_b else None
    except OSError as exc:
        rep.add([_damaged(where, _why(exc))])
        return None
    return ka, kb


def _head(p: Path, n: int) -> bytes:
    """The first ``n`` bytes of file ``p`` (fewer if it is shorter)."""
    with _open_regular(p) as fh:
        return fh.read(n)


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with _open_regular(p) as fh:
        while chunk := fh.read(CHUNK_BYTES):
            h.update(chunk)
    return h.hexdigest()


def _names(p: Path) -> set[str]:
    with os.scandir(p) as it:
        return {e.name for e in it}


def _entries(p: Path) -> int | None:
    """How many names folder ``p`` lists (None: it cannot be listed)."""
    try:
        return len(_names(p))
    except OSError:
        return None


def _names_a(p: Path) -> set[str]:
    """The entries of A's folder ``p``: an error if it cannot be read."""
    try:
        return _names(p)
    except OSError as exc:
        raise _cannot_read(p, exc) from None


def _presence(where: str, ka: str | None, kb: str | None) -> Difference:
    """An entry on one side only, ``WHERE KIND: True != False`` (KIND: the present side's
    kind, :func:`_kind`: file, folder, link, fifo ...), or of other kinds on the two sides,
    ``WHERE type: 'folder' != 'file'``."""
    if ka is None or kb is None:
        return Difference(where, None, ka or kb, ka is not None, kb is not None)
    return Difference(where, None, "type", ka, kb)


def _other_entries(rep: Report, rel: str, a: Path, b: Path, names_a: set[str],
                   names_b: set[str], known_a: set, known_b: set) -> None:
    """The entries of folders ``a`` and ``b`` (their names ``names_a``, ``names_b``) that
    ``lower`` does not write (``known_a`` and ``known_b`` are compared elsewhere: the
    outputs' NEFF names may differ, and A's ``y.neff`` is then an entry of A's own): one on
    one side only is ``WHERE KIND: True != False`` (KIND: :func:`_kind`); on both, a
    different kind is ``type``, a file whose bytes differ ``sha256``, a link whose target
    differs ``target``, and a folder is walked the same way, before the next entry
    (a stack of the folders being walked, not a call per level: any depth).  Links are never
    followed.  What cannot be read is an error in A, ``WHERE damaged in B`` in B."""
    def entries(rel, a, b, names_a, names_b, known_a, known_b):
        """``(where, A's path, B's path, in A, in B)`` of each entry to compare, by name."""
        for name in sorted((names_a - known_a) | (names_b - known_b)):
            # (a name known on one side is not an entry of that side's own: absent there)
            # (the name read from the disk as UTF-8 text: docs/CLI.md "Paths in the output")
            yield (f"{rel}/{path_text(name)}" if rel else path_text(name), a / name, b / name,
                   name in names_a and name not in known_a,
                   name in names_b and name not in known_b)

    walks = [entries(rel, a, b, names_a, names_b, known_a, known_b)]
    while walks:
        entry = next(walks[-1], None)
        if entry is None:  # (the folder is done: back to its parent's next entry)
            walks.pop()
            continue
        where, pa, pb, in_a, in_b = entry
        if (kinds := _kinds(rep, where, pa, pb, in_a, in_b)) is None:
            continue
        ka, kb = kinds
        if ka is None and kb is None:  # (gone since it was listed)
            continue
        if ka != kb or ka is None:
            rep.add([_presence(where, ka, kb)])
        elif ka == "file":
            if not _same_bytes(pa, pb):
                pair = _read_pair(rep, where, pa, lambda: _sha256(pa), lambda: _sha256(pb))
                if pair is not None:
                    rep.add([Difference(where, None, "sha256", *pair)])
        elif ka == "link":
            pair = _read_pair(rep, where, pa, lambda: os.readlink(pa), lambda: os.readlink(pb))
            if pair is not None and pair[0] != pair[1]:
                rep.add([Difference(where, None, "target", *pair)])
        elif ka == "folder":
            pair = _read_pair(rep, where, pa, lambda: _names_a(pa), lambda: _names(pb))
            if pair is not None:
                walks.append(entries(where, pa, pb, *pair, set(), set()))


def _expected_file(rep: Report, where: str, pa: Path, pb: Path, in_a: bool,
                   in_b: bool) -> bool:
    """A file ``lower`` writes (a rank manifest, an artifact, the NEFF): whether both sides
    have it as a regular file, to be compared.  Otherwise its difference is reported: on one
    side only ``WHERE KIND: True != False``; B's a link ``WHERE type: 'file' != 'link'``
    (never followed); B's another kind, or unreadable to tell, ``WHERE damaged in B``.  A's
    that is not a regular file (a link included) or cannot be told is an error."""
    if (kinds := _kinds(rep, where, pa, pb, in_a, in_b)) is None:
        return False
    ka, kb = kinds
    if ka is None and kb is None:
        return False
    if ka not in (None, "file"):
        raise OutputError(f"{escape_path(pa)}: not a regular file")
    if ka is None or kb is None or kb == "link":
        rep.add([_presence(where, ka, kb)])
        return False
    if kb != "file":
        rep.add([_damaged(where, "not a regular file")])
        return False
    return True


def _rank_manifest_diff(rep: Report, r: str, pa: Path, pb: Path, in_a: bool,
                        in_b: bool, held: dict[str, list[Difference]] | None = None) -> bool:
    """A rank's manifests key by key when their bytes differ.  A's must be readable if
    present (an error otherwise); B's missing is a difference, unreadable its damage.  One
    over :data:`~nrtrewrite.emit.formats.MAX_MANIFEST_BYTES` is not read, nor compared with
    the other: A's an error, B's its damage.  The lines of its checksum keys (``files[NAME]
    .sha256``, ``.bytes``, ``.records``: :func:`_rank_checksum`) go to ``held`` by artifact
    name (None: dropped).  Returns whether the manifests compare identical (as JSON: layout
    aside; both absent included)."""
    held = {} if held is None else held
    where = f"{r}/manifest.json"
    before = rep.count
    if not _expected_file(rep, where, pa, pb, in_a, in_b):
        return rep.count == before  # (absent on both sides: identical)
    try:  # (over the size limit: neither compared nor read, whatever B's bytes)
        _manifest_size(os.lstat(pa).st_size)
    except OSError as exc:
        raise _cannot_read(pa, exc) from None
    try:
        _manifest_size(os.lstat(pb).st_size)
    except OSError as exc:
        rep.add([_damaged(where, _why(exc))])
        return False
    if _same_bytes(pa, pb):
        return True
    doc_a = _json_a(pa)
    doc_b = _json_b(rep, where, pb)
    if doc_b is None:
        return False
    n_held = sum(map(len, held.values()))
    rep.add_values(where, _hold_checksums(_json_diff(where, doc_a, doc_b, keyed=True),
                                          _rank_checksum, held),
                   isinstance(doc_a, dict) and isinstance(doc_b, dict))
    n_new = sum(map(len, held.values())) - n_held  # (its checksum keys' lines)
    same = rep.count == before and n_new == 0
    if (rep.strict and rep.count == before
            and (n_new == 0 or not same_layout(pa, pb, n_new))):
        # the same JSON in other bytes, or but for its checksum keys' values in another
        # layout: --strict's difference, whatever those keys' notes (review 55r)
        rep.add(layout_lines(where, pa, pb))
        return False
    return same


def _rank_diff(rep: Report, r: str, ra: Path, rb: Path, in_a: bool, in_b: bool) -> bool:
    """Rank folder ``r`` of both sides (``in_a``, ``in_b``: listed there): its manifest, the
    entries ``lower`` does not write, then its artifacts in FORMATS §1 order.  A checksum
    key of its manifest (``files[NAME].sha256``, ``.bytes``, ``.records``) is settled once
    its artifact is compared (:func:`_settle`).  Returns whether the rank manifest compares
    identical (a rank folder on one side only, or that cannot be read in B, is no identical
    manifest)."""
    if (kinds := _kinds(rep, r, ra, rb, in_a, in_b)) is None:
        return False
    ka, kb = kinds
    if ka != kb:  # a rank folder on one side only, or a file or link in its place
        if {ka, kb} == {None, "folder"}:  # (past --max its count line: docs/CLI.md)
            side = "a" if ka else "b"
            rep.add_folder(r, side, lambda: _entries(ra if ka else rb))
        else:
            rep.add([_presence(r, ka, kb)])
        return False
    names_a = _names_a(ra)
    try:
        names_b = _names(rb)
    except OSError as exc:  # B's rank folder cannot be read: its one line
        rep.add([_damaged(r, _why(exc))])
        return False
    held: dict[str, list[Difference]] = {}
    same = _rank_manifest_diff(rep, r, ra / "manifest.json", rb / "manifest.json",
                               "manifest.json" in names_a, "manifest.json" in names_b, held)
    known = {"manifest.json", *F.ARTIFACTS}
    _other_entries(rep, r, ra, rb, names_a, names_b, known, known)
    # (the FIFO files' slices once needed: _fifo_slices)
    slices = functools.cache(lambda: _fifo_slices(ra, rb))

    for name in F.ARTIFACTS:
        before = rep.count
        _artifact_diff(rep, f"{r}/{name}", name, ra / name, rb / name, name in names_a,
                       name in names_b, slices if name in FIFO_KEYS else None)
        _settle(rep, held.pop(name, None), f"{r}/{name}", rep.count == before)
    return same


def _artifact_diff(rep: Report, where: str, name: str, fa: Path, fb: Path, in_a: bool,
                   in_b: bool, slices: Callable[[], dict | str] | None = None) -> None:
    """Artifact ``name`` of a rank on both sides, record by record (:func:`_records_diff`)
    when their bytes differ; a FIFO file, ``slices`` given, slice by slice when the rank
    manifests' ``fifo`` slices line its records up (:func:`_fifo_slices`), else by position
    with ``on_positional`` told why."""
    if not _expected_file(rep, where, fa, fb, in_a, in_b):
        return
    n_a, why = _artifact_records(fa, name)
    if why:  # the reference is damaged: an error
        raise OutputError(f"{escape_path(fa)}: {why}")
    if _same_bytes(fa, fb):
        return
    n_b, why = _artifact_records(fb, name)
    if why:
        rep.add([_damaged(where, why)])
        if n_b is None:  # (not read: nothing to compare)
            return
    lined = ops = None
    if slices is not None:
        got = slices()
        if isinstance(got, str):
            with rep.atomic():
                rep.on_positional(where, got)
        else:
            lined = got[name]
            ops = got["net_ops.bin"]
    _records_diff(rep, where, name, fa, fb, n_a, n_b, lined, ops)


def diff_outputs(a: str | Path, b: str | Path, strict: bool = False) -> list[Difference]:
    """Every difference between output folders ``a`` and ``b``, as lines, in a list (for
    tests and small outputs: the ``diff`` command streams them through :func:`compare`);
    ``strict`` as ``diff --strict`` (any file of other bytes is a difference)."""
    out: list[Difference] = []
    compare(a, b, Report(None, on_difference=lambda index, lines: out.extend(lines),
                         strict=strict))
    return out


def _is_folder(p: Path) -> bool:
    """Whether ``p`` is a folder, not following a link (False when it cannot be told: its
    damage is reported as an entry's)."""
    try:
        return _kind(p) == "folder"
    except OSError:
        return False


#: First keys of the top-level manifest (FORMATS §1.1) that ``diff --ignore`` may name, with
#: a dotted sub-path or whole: what differs between lowerings of the same model by another
#: version (``tool_version``), under another file name (``input.name``, ``output_neff.name``)
#: or with the same topology given by another path (``options.topology``).
IGNORABLE_KEYS = ("tool_version", "input", "output_neff", "options", "topology", "memory",
                  "world", "ranks", "triggers")


#: Of :data:`IGNORABLE_KEYS`, those whose value is no object (FORMATS §1.1: a string, lists):
#: ignored whole only, having no keys inside.
WHOLE_ONLY_KEYS = {"tool_version": "a string", "world": "a list", "ranks": "a list",
                   "triggers": "a list"}


def check_ignored(paths: Iterable[str]) -> tuple[str, ...]:
    """The ``--ignore`` key paths, each refused (ValueError) unless its first key is one of
    :data:`IGNORABLE_KEYS`, no part is empty, and it names keys inside only of an object
    (not of :data:`WHOLE_ONLY_KEYS`)."""
    out = []
    for p in paths:
        parts = p.split(".")
        if parts[0] not in IGNORABLE_KEYS or not all(parts):
            # (a first key mistyped: that key, with the rest of the path, the keys compared
            # alone: a shared rest made any first key close, `x.name` -> `world.name`; and
            # not a key ignored whole only with a rest, which is refused in turn)
            close = [k for k in IGNORABLE_KEYS if len(parts) == 1 or k not in WHOLE_ONLY_KEYS]
            rest = "".join(f".{q}" for q in parts[1:])
            hint = did_you_mean(parts[0] if all(parts) else None, close,
                                f"its keys: {', '.join(IGNORABLE_KEYS)}; a key inside one "
                                "after a dot, e.g. input.name", lambda k: repr(k + rest))
            raise ValueError(f"{p!r} is not a key path of the top-level manifest.json that "
                             f"may be ignored{hint}")
        if len(parts) > 1 and parts[0] in WHOLE_ONLY_KEYS:
            raise ValueError(f"{p!r}: {parts[0]} is {WHOLE_ONLY_KEYS[parts[0]]} in the "
                             f"manifest, with no keys inside; ignore it whole ({parts[0]})")
        out.append(p)
    return tuple(out)


def unmatched_ignored(paths: Iterable[str], *docs: dict) -> list[str]:
    """The ``--ignore`` paths that name a value in none of ``docs`` (the two manifests): a
    typo in a CI recipe (``input.nmae``) would otherwise ignore nothing, silently."""
    return [p for p in paths
            if all(_value_at(d, p.split(".")) is ABSENT for d in docs)]


def _value_at(doc, parts: list[str]):
    """The value at the key path ``parts`` of ``doc`` (keys of nested objects), or
    :data:`ABSENT` where one of them is not there (or not inside an object)."""
    for k in parts:
        if not isinstance(doc, dict) or k not in doc:
            return ABSENT
        doc = doc[k]
    return doc


def _without(doc: dict, paths: tuple[str, ...]) -> dict:
    """``doc`` with the values at the dotted key ``paths`` left out (copies along the paths
    only; a path that is not there leaves it as it is)."""
    if not paths:
        return doc
    doc = dict(doc)
    for p in paths:
        *outer, last = p.split(".")
        cur = doc
        for k in outer:
            sub = cur.get(k)
            if not isinstance(sub, dict):
                break
            cur[k] = cur = dict(sub)
        else:
            cur.pop(last, None)
    return doc


def _ignored_differ(paths: tuple[str, ...], ma: dict, mb: dict) -> bool:
    """Whether a value at one of the ``--ignore`` key ``paths`` differs between the
    manifests ``ma`` and ``mb`` (is on one side only, or another value): those values
    alone, not the whole manifests walked again."""
    for p in paths:
        va, vb = _value_at(ma, p.split(".")), _value_at(mb, p.split("."))
        if (va is ABSENT) != (vb is ABSENT) or _which_differ([va], [vb])[0]:
            return True
    return False


#: The top-level manifest's keys that tell what wrote it (FORMATS §1.1): ``diff`` names
#: both sides' values when they differ (:func:`manifest_versions`).
VERSION_KEYS = ("format_version", "tool_version")


def manifest_versions(doc: dict) -> dict:
    """The :data:`VERSION_KEYS` a top-level manifest has, with their values."""
    return {k: doc[k] for k in VERSION_KEYS if k in doc}


def versions_text(where_a: str, va: dict, where_b: str, vb: dict) -> str:
    """The note that two outputs' versions differ (docs/CLI.md "diff"): each side's
    manifest (``where_a``, ``where_b``, as printed) with its :data:`VERSION_KEYS` as JSON,
    ``no KEY`` for one it lacks."""
    def side(where: str, v: dict) -> str:
        return where + " has " + ", ".join(f"{k} {_json_text(v[k])}" if k in v else f"no {k}"
                                           for k in VERSION_KEYS)
    return (f"the outputs' versions differ: {side(where_a, va)}; {side(where_b, vb)}; "
            "differences may come from the versions alone")


def compare(a: str | Path, b: str | Path, rep: Report, ignore: Iterable[str] = (),
            warn: Callable[[str], None] | None = None,
            on_versions: Callable[[dict, dict], None] | None = None) -> Report:
    """Compare output folders ``a`` and ``b``, handing every difference to ``rep``.  Nothing
    is followed through a link; what cannot be read in A is an error (the reference), in B a
    ``damaged`` difference (docs/CLI.md).  ``ignore``: key paths of the top-level manifest
    whose values are not compared (:func:`check_ignored`); ``warn`` is told of each that
    names a value in neither manifest (:func:`unmatched_ignored`).  ``on_versions`` is
    given both manifests' :func:`manifest_versions` when they differ (whatever
    ``ignore``), before any difference of the manifests: no difference itself (a
    differing value is also the manifests' difference, unless ignored)."""
    ignore = check_ignored(ignore)
    a, b = Path(a), Path(b)
    held: dict[str, list[Difference]] = {}  # the top manifest's checksum keys' lines
    for p in (a, b):
        _check_ours(p)
    if _same_bytes(a / "manifest.json", b / "manifest.json"):
        # nothing to compare (a HIER plan's manifest: tens of MB of JSON): read for the NEFF
        # name only, without the duplicate-key check
        ma = mb = _top_manifest(a, strict=False)[0]
    else:
        ma, why, fld = _top_manifest(a)
        if why is not None:  # a key twice in the reference: an error
            raise OutputError(why, file=str(a / "manifest.json"), field=fld)
        # (B's that cannot be read is no output folder: an error, as _check_ours's)
        mb, why, fld = _top_manifest(b)
        before = rep.count
        if on_versions is not None:  # (equal bytes, above: the same versions)
            va, vb = manifest_versions(ma), manifest_versions(mb)
            if any(_which_differ([va.get(k, ABSENT) for k in VERSION_KEYS],
                                 [vb.get(k, ABSENT) for k in VERSION_KEYS])):
                on_versions(va, vb)
        if why is not None:  # a key twice: damage, and the manifests compared as JSON reads B
            rep.add([_damaged("manifest.json", f"field {fld}: {why}" if fld else why)])
        rep.add_values("manifest.json",
                       _hold_checksums(_json_diff("manifest.json", _without(ma, ignore),
                                                  _without(mb, ignore), keyed=True),
                                       _top_checksum, held), True)
        n_held = sum(map(len, held.values()))
        if (rep.count == before and not _ignored_differ(ignore, ma, mb)
                and (n_held == 0 or not same_layout(a / "manifest.json", b / "manifest.json",
                                                    n_held))):
            # the same JSON in other bytes, or but for its checksum keys' values (held: their
            # notes come later) in another layout (judged on the whole manifests, an
            # --ignore'd key's value included: one that differs accounts for the bytes): a
            # note, or with --strict a difference (review 55r: a held key hid it)
            _layout(rep, layout_lines("manifest.json", a / "manifest.json",
                                      b / "manifest.json"))
    if warn is not None:
        for p in unmatched_ignored(ignore, ma, mb):
            warn(f"--ignore {escape_controls(p)}: neither manifest.json has this key path, so it "
                 "ignores nothing")
    na = _neff_name(ma, a)
    try:
        nb = _neff_name(mb, b)
    except OutputError as err:  # (the manifests' difference names the value)
        rep.add([_damaged("manifest.json", f"field output_neff: {err.why}")])
        nb = ""  # (B's NEFF cannot be found: not compared)
    # a NEFF named by one manifest only (their difference names output_neff): the file of
    # that name on the other side is that side's NEFF, compared as one, no entry of its own
    if na is None and nb:
        na = nb
    elif nb is None:
        nb = na
    names_a, names_b = _names_a(a), _names_a(b)  # (both read by _check_ours)
    ranks_a = {n for n in names_a if RANK_DIR_NAME.fullmatch(n) and _is_folder(a / n)}
    ranks_b = {n for n in names_b if RANK_DIR_NAME.fullmatch(n) and _is_folder(b / n)}
    common = {"manifest.json"} | ranks_a | ranks_b  # (a rank folder on one side: below)
    # each side's own NEFF name (B's unknown: the damage line stands for A's name there)
    _other_entries(rep, "", a, b, names_a, names_b, common | {na}, common | {nb or na})
    for r in sorted(ranks_a | ranks_b, key=rank_dir_order):
        same = _rank_diff(rep, r, a / r, b / r, r in names_a, r in names_b)
        _settle(rep, held.pop(r, None), f"{r}/manifest.json", same)
    for r in sorted((k for k in held if k != NEFF_CHECKSUM), key=rank_dir_order):
        # (a rank neither side has a folder of: its manifest absent on both sides)
        _settle(rep, held.pop(r), f"{r}/manifest.json", True)
    if na is not None and nb != "":
        before = rep.count
        wn = path_text(na)  # (its members' names joined to it are the archive's text)
        if _expected_file(rep, wn, a / na, b / nb, na in names_a, nb in names_b):
            # (each side's own manifest: not --ignore'd)
            ka, kb = manifest_kick_indices(ma), manifest_kick_indices(mb)
            _neff_diff(rep, wn, a / na, b / nb,
                       {m: ka[m] & kb[m] for m in ka.keys() & kb.keys()})
        _settle(rep, held.pop(NEFF_CHECKSUM, None), wn, rep.count == before)
    return rep
