"""Typed reads of an output folder's manifests (docs/FORMATS.md §1.1, §1.2) for the simulator.

Every value the simulator takes from ``OUT/manifest.json`` or a rank's ``manifest.json`` is
read through a :class:`Field`: the value and its key path in the document
(``triggers[0].chunk.pgta``).  A required key that is absent, or a value of another JSON
type than the format gives it (a string or a list where an integer belongs, an integer
where an object does, JSON ``true`` for a number), is one :class:`OutputError` naming the
file and the path (``OUT/manifest.json: field ranks[0]: must be an integer, not "x"``): the
folder cannot be read as an output of the format, so there is no verdict (status 2), as
for a file that cannot be read.  What a well-typed value says (a region past the core
window, a rank of the world missing from the topology table) is checked where it is used,
a protocol error (status 1), and only once every manifest of the folder has been read
through these types (``Simulator.load_manifest``), so the status never depends on which
key holds which fault.
"""

from __future__ import annotations

import json
from typing import Any

from nrtrewrite.errors import OutputError, counted, cut_middle
from nrtrewrite.jsonin import joined_key
from nrtrewrite.topology.rings import NEC_MAX_CHANNELS

#: The integers the simulator takes (numpy's int64: offsets, sizes, counts, ranks).
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
#: The highest channel id: a collective has nec.h's NEC_MAX_CHANNELS (32) channels, 0..31
#: (the ring channel semaphores 16 + 4 c .. 16 + 4 c + 3, FORMATS §7).
MAX_CHANNEL = NEC_MAX_CHANNELS - 1


def json_kind(value: Any) -> str:
    """``value`` as a message names it: a scalar as JSON writes it (at most 60 characters),
    a container by its kind and size."""
    if isinstance(value, dict):
        return f"an object ({counted(len(value), 'key')})"
    if isinstance(value, list):
        return f"a list ({counted(len(value), 'item')})"
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return cut_middle(text, 60, 40, 15)


class Field:
    """A value of a manifest at key path :attr:`path` of :attr:`file`.

    ``f["key"]`` is a required member of an object, ``f.get("key")`` an optional one (absent
    or null: ``default``); :meth:`int`, :meth:`str`, :meth:`bool`, :meth:`dict`, :meth:`list`
    and :meth:`ints` return the plain value once its type is checked; :meth:`items` the
    members of a list as fields.  Each refusal is an :class:`OutputError` naming the path."""

    __slots__ = ("value", "path", "file")

    def __init__(self, value: Any, path: str = "", file: str = ""):
        self.value = value
        self.path = path
        self.file = file

    # -- where -------------------------------------------------------------------------
    def _sub(self, key: str | int) -> str:
        """The key path of member ``key``: ``path[2]``, ``path.key``, or a key that is not a
        plain name quoted, ``files["cce.bin"]`` (:func:`jsonin.joined_key`, as every reader's
        key path: ``files.cce.bin`` would read as key ``bin`` of ``cce``)."""
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return joined_key(self.path, key)

    def bad(self, why: str) -> OutputError:
        """The one-line error for this value: ``FILE: field PATH: WHY``."""
        return OutputError(why, file=self.file or None, field=self.path or None)

    def _want(self, what: str) -> OutputError:
        return self.bad(f"must be {what}, not {json_kind(self.value)}")

    # -- members -----------------------------------------------------------------------
    def __getitem__(self, key: str) -> "Field":
        obj = self.dict()
        if key not in obj:
            raise OutputError("missing", file=self.file or None, field=self._sub(key))
        return Field(obj[key], self._sub(key), self.file)

    def get(self, key: str, default: Any = None) -> "Field":
        """Member ``key`` of the object; ``default`` when it is absent or null."""
        val = self.dict().get(key)
        return Field(default if val is None else val, self._sub(key), self.file)

    def has(self, key: str) -> bool:
        return key in self.dict()

    @property
    def null(self) -> bool:
        return self.value is None

    # -- typed values ------------------------------------------------------------------
    def int(self, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
        """An integer ``lo`` .. ``hi`` (JSON ``true`` / ``false`` and ``1.0`` are not)."""
        v = self.value
        if type(v) is not int:
            raise self._want("an integer")
        if not lo <= v <= hi:
            raise self.bad(f"{json_kind(v)} is outside {lo}..{hi}")
        return v

    def opt_int(self, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int | None:
        return None if self.value is None else self.int(lo, hi)

    def str(self) -> str:
        if not isinstance(self.value, str):
            raise self._want("a string")
        return self.value

    def opt_str(self) -> str | None:
        return None if self.value is None else self.str()

    def bool(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._want("true or false")
        return self.value

    def dict(self) -> dict:
        if not isinstance(self.value, dict):
            raise self._want("an object")
        return self.value

    def list(self) -> list:
        if not isinstance(self.value, list):
            raise self._want("a list")
        return self.value

    def items(self) -> list["Field"]:
        """The members of a list, each a field (``path[i]``)."""
        return [Field(v, f"{self.path}[{i}]", self.file) for i, v in enumerate(self.list())]

    def ints(self, lo: int = INT64_MIN, hi: int = INT64_MAX, *, length: int | None = None
             ) -> list[int]:
        """A list of integers ``lo`` .. ``hi`` (of ``length`` items when given)."""
        vals = self.list()
        if length is not None and len(vals) != length:
            raise self._want(f"a list of {length} integers")
        if not all(type(v) is int and lo <= v <= hi for v in vals):  # (the common case: C)
            for f in self.items():
                f.int(lo, hi)
        return vals
