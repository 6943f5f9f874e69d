"""``json.dumps(obj, indent=N, sort_keys=True)``, the same text, faster on big manifests.

With ``indent`` set, the standard library encodes in pure Python, container by container
and item by item; a HIER plan's manifest (``large128``: 52 MB, mostly lists of ranks) took
seconds.  :func:`dumps` walks the containers the same way but writes a list of scalars
in one ``join`` and strings with the C escaper, so the output is byte-identical (tested
against ``json.dumps`` on generated documents and on every fixture's manifests).

``compact_from``: containers nested that many levels deep or deeper (the document itself is
level 0) are written on one line each, as ``json.dumps(obj, sort_keys=True,
separators=(", ", ": "))`` would write them (the C encoder: a HIER plan's per-group records
in the top-level manifest, docs/FORMATS.md §1.1).

Only JSON's own types: dict (keys str, int, float, bool or None, as ``json`` converts
them), list, tuple, str, int, float, bool, None; anything else raises ``TypeError`` as
``json.dumps`` would.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _esc

_INF = float("inf")

#: One line: ``json.dumps(obj, sort_keys=True, separators=(", ", ": "))``, one encoder for
#: every call (``json.dumps`` with options makes a new one each time).
_compact = json.JSONEncoder(sort_keys=True, separators=(", ", ": ")).encode


def _float(x: float) -> str:
    if x != x:
        return "NaN"
    if x == _INF:
        return "Infinity"
    if x == -_INF:
        return "-Infinity"
    return float.__repr__(x)


def _scalar(x) -> str | None:
    """The JSON text of a scalar, or None for a container."""
    if isinstance(x, str):
        return _esc(x)
    if x is None:
        return "null"
    if x is True:
        return "true"
    if x is False:
        return "false"
    if isinstance(x, int):
        return int.__repr__(x)
    if isinstance(x, float):
        return _float(x)
    return None


def _scalars(seq) -> list[str | None]:
    """:func:`_scalar` of each item (a list of plain ints or strings in one map)."""
    kinds = set(map(type, seq))
    if kinds == {int}:
        return list(map(int.__repr__, seq))
    if kinds == {str}:
        return list(map(_esc, seq))
    return [_scalar(x) for x in seq]


def _key(k) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, (bool, type(None))) or isinstance(k, (int, float)):
        return json.dumps(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def dumps(obj, indent: int = 1, compact_from: int | None = None) -> str:
    """``json.dumps(obj, indent=indent, sort_keys=True)`` (containers ``compact_from`` levels
    deep on one line)."""
    out: list[str] = []
    _encode(obj, 0, " " * indent, out, compact_from)
    return "".join(out)


def dumps_nested(obj, level: int, indent: int = 1, compact_from: int | None = None) -> str:
    """The text of ``obj`` as it appears in :func:`dumps` of a document where it is a value
    nested ``level`` containers deep (its own lines indented from that level)."""
    out: list[str] = []
    _encode(obj, level, " " * indent, out, compact_from)
    return "".join(out)


def _encode(obj, level: int, step: str, out: list[str], compact_from: int | None) -> None:
    s = _scalar(obj)
    if s is not None:
        out.append(s)
        return
    if compact_from is not None and level >= compact_from:
        if not isinstance(obj, (dict, list, tuple)):
            raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
        out.append(_compact(obj))
        return
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        items = sorted(obj.items())
        values = [v for _k, v in items]
        _container("{", "}", [_esc(_key(k)) + ": " for k, _v in items], values, level, step,
                   out, compact_from)
        return
    if isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        _container("[", "]", None, obj, level, step, out, compact_from)
        return
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def _container(opening: str, closing: str, heads: list[str] | None, values, level: int,
               step: str, out: list[str], compact_from: int | None) -> None:
    """A non-empty dict or list: each item on its own line, its head (a dict's key; a list:
    ``heads`` None) before it; items that are all scalars in one join."""
    inner = "\n" + step * (level + 1)
    if compact_from is not None and level + 1 >= compact_from:
        texts = list(map(_compact, values))  # the items on one line each, scalars or not
    else:
        texts = _scalars(values)
    if None not in texts:
        body = texts if heads is None else [h + t for h, t in zip(heads, texts)]
        out.append(opening + inner + ("," + inner).join(body) + "\n" + step * level + closing)
        return
    for i, (v, t) in enumerate(zip(values, texts)):
        out.append((opening if i == 0 else ",") + inner + ("" if heads is None else heads[i]))
        if t is not None:
            out.append(t)
        else:
            _encode(v, level + 1, step, out, compact_from)
    out.append("\n" + step * level + closing)
