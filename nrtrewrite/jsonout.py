"""``json.dumps(obj, indent=N, sort_keys=True)``, the same text, faster on big manifests.

With ``indent`` set, the standard library encodes in pure Python, container by container
and item by item; a HIER plan's manifest (``large128``: 52 MB, mostly lists of ranks) took
seconds.  :func:`dumps` walks the containers the same way but writes a list of scalars
in one ``join`` and strings with the C escaper, so the output is byte-identical (tested
against ``json.dumps`` on generated documents and on every fixture's manifests).

Only JSON's own types: dict (keys str, int, float, bool or None, as ``json`` converts
them), list, tuple, str, int, float, bool, None; anything else raises ``TypeError`` as
``json.dumps`` would.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii as _esc

_INF = float("inf")


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


def dumps(obj, indent: int = 1) -> str:
    """``json.dumps(obj, indent=indent, sort_keys=True)``."""
    out: list[str] = []
    _encode(obj, 0, " " * indent, out)
    return "".join(out)


def _encode(obj, level: int, step: str, out: list[str]) -> None:
    s = _scalar(obj)
    if s is not None:
        out.append(s)
        return
    if isinstance(obj, dict):
        if not obj:
            out.append("{}")
            return
        inner = "\n" + step * (level + 1)
        items = sorted(obj.items())
        texts = _scalars([v for _k, v in items])
        if None not in texts:  # a dict of scalars: one join
            out.append("{" + inner + ("," + inner).join(
                [_esc(_key(k)) + ": " + t for (k, _v), t in zip(items, texts)])
                + "\n" + step * level + "}")
            return
        first = True
        for (k, v), t in zip(items, texts):
            out.append(("{" if first else ",") + inner + _esc(_key(k)) + ": ")
            first = False
            if t is not None:
                out.append(t)
            else:
                _encode(v, level + 1, step, out)
        out.append("\n" + step * level + "}")
        return
    if isinstance(obj, (list, tuple)):
        if not obj:
            out.append("[]")
            return
        inner = "\n" + step * (level + 1)
        texts = _scalars(obj)
        if None not in texts:  # a list of scalars: one join
            out.append("[" + inner + ("," + inner).join(texts) + "\n" + step * level + "]")
            return
        for i, x in enumerate(obj):
            out.append(("[" if i == 0 else ",") + inner)
            t = texts[i]
            if t is not None:
                out.append(t)
            else:
                _encode(x, level + 1, step, out)
        out.append("\n" + step * level + "]")
        return
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")
