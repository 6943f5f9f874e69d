"""Reading JSON strictly: every JSON document nrtrewrite reads goes through :func:`loads`.

Python's ``json`` accepts ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON) and reads a
number beyond a double's range (``1e999``) as an infinity; nothing nrtrewrite reads has a
meaning for a number that is not finite, so every reader refuses them, naming the key path
of the value (``var[2].size``: the reader's own way of naming a field).  The NEFF's JSON
members (and topology files) are read with ``strict_objects``: no duplicate keys either,
and no integer of more than :data:`MAX_JSON_INT_DIGITS` digits (a one-line error instead of
CPython's ``ValueError``).  The output manifests nrtrewrite wrote itself are read without
it: their integers are not in question, and the hook would cost a Python call per integer of
a manifest of tens of megabytes; ``diff`` checks their keys (``unique_keys``) when it parses
one, whose key given twice would hide a value.

A refusal is a :class:`JsonRule` (a ``ValueError``), which each reader turns into its own
one-line error naming the file (or member) and the key path.

``diff`` reads with ``exact_floats``: a number written with a fraction or an exponent is a
:class:`JsonFloat`, which keeps its text, and equals only a ``JsonFloat`` of the same exact
decimal value (``2`` and ``2.0``, ``1725`` and ``1725.0000000000001`` are other values
there, although Python's ``==`` calls them equal).
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

from nrtrewrite.errors import cut_middle

#: Digits of a JSON integer: CPython's default limit on converting a string to an int
#: (``sys.int_info.default_max_str_digits``), checked here so that it is a one-line error
#: whatever the interpreter's setting; every integer the contract has fits 20 digits.
MAX_JSON_INT_DIGITS = 4300

#: A number's text in a message: at most this many characters (then its ends and length).
_SHOWN_NUMBER = 40


class JsonRule(ValueError):
    """The document breaks a rule of :func:`loads`; ``path`` is the key path of the value
    (``var[2].size``; None when it cannot be told), ``why`` the reason; ``non_finite`` the
    value read when the rule broken is that numbers are finite (``inf``, ``-inf``, ``nan``),
    else None."""

    def __init__(self, why: str, path: str | None = None, non_finite: float | None = None):
        super().__init__(why)
        self.why = why
        self.path = path or None
        self.non_finite = non_finite


class JsonFloat(float):
    """A JSON number written with a fraction or an exponent (``2.0``, ``1e3``), as read by
    :func:`loads` with ``exact_floats``: a float (the nearest double) that keeps the text it
    was written as (:attr:`text`, shown by ``repr``) and equals only another ``JsonFloat`` of
    the same exact decimal value: never an ``int`` or ``bool`` (``2 != 2.0``), nor a number
    that rounds to the same double (``1.5 != 1.50000000000000001``); ``1.0``, ``1.00`` and
    ``1e0`` are one value.  The JSON encoder writes it as the double it is."""

    __slots__ = ("text",)

    def __new__(cls, text: str):
        self = super().__new__(cls, text)
        self.text = text
        return self

    def _exact(self) -> Decimal:
        return Decimal(self.text)

    def __eq__(self, other):
        if isinstance(other, JsonFloat):
            return self._exact() == other._exact()
        if isinstance(other, int):  # bool included
            return False
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = float.__hash__  # (equal exact values are equal doubles)

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):  # (in C for the objects without one: most)
        seen: set = set()
        for key, _ in pairs:
            if key in seen:
                raise JsonRule(f"duplicate key {key!r}")
            seen.add(key)
    return out


def _duplicate_key_path(text: str | bytes) -> str | None:
    """The key path of the first key given twice in an object (the one
    :func:`_no_duplicate_keys` refused: the first object to close), found by parsing again
    with every object kept and walking to the marked one (an error's cost only).  The
    parse reads no integer (each is 0): one past :data:`MAX_JSON_INT_DIGITS` or CPython's
    limit later in the text, which the first parse did not reach, lost the path."""
    marked: list[tuple[dict, str]] = []

    def keep(pairs: list[tuple[str, Any]]) -> dict:
        out = dict(pairs)
        if not marked and len(out) != len(pairs):
            seen: set = set()
            for key, _ in pairs:
                if key in seen:
                    marked.append((out, key))
                    break
                seen.add(key)
        return out

    try:
        doc = json.loads(text, object_pairs_hook=keep, parse_constant=float,
                         parse_int=lambda num: 0)
    except (ValueError, RecursionError):
        return None
    if not marked:
        return None
    target, key = marked[0]
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, val = stack.pop()
        if val is target:
            return f"{path}.{key}" if path else str(key)
        if isinstance(val, dict):
            stack.extend((f"{path}.{k}" if path else str(k), sub) for k, sub in val.items())
        elif isinstance(val, list):
            stack.extend((f"{path}[{i}]", sub) for i, sub in enumerate(val))
    return None


class _LongInt:
    """Stands for an integer :func:`_parse_int` refuses, in :func:`_long_int_path`'s parse."""


class _Pairs(list):
    """An object's (key, value) pairs as written, a key given twice kept twice."""


def _children(path: str, val: Any) -> list[tuple[str, Any]] | None:
    """A container's members with their key paths (``a.b``, ``a[2]``), in document order;
    None for a value that is no container.  Pairs as parsed (:class:`_Pairs`) keep a key
    given twice."""
    if isinstance(val, _Pairs):
        return [(f"{path}.{k}" if path else str(k), sub) for k, sub in val]
    if isinstance(val, dict):
        return [(f"{path}.{k}" if path else str(k), sub) for k, sub in val.items()]
    if isinstance(val, (list, tuple)):
        return [(f"{path}[{i}]", sub) for i, sub in enumerate(val)]
    return None


def _long_int_path(text: str) -> str | None:
    """The key path of the first integer of more than :data:`MAX_JSON_INT_DIGITS` digits (the
    one :func:`_parse_int` refused), found by parsing again with each such integer marked
    and walking the document in order to the first mark (an error's cost only)."""
    def mark(num: str):
        return _LongInt() if len(num) - num.startswith("-") > MAX_JSON_INT_DIGITS else 0

    try:
        doc = json.loads(text, parse_int=mark, parse_constant=float, parse_float=float,
                         object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, val = stack.pop()
        if isinstance(val, _LongInt):
            return path or None
        stack.extend(reversed(_children(path, val) or ()))  # popped in document order
    return None


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_JSON_INT_DIGITS:
        raise JsonRule(f"an integer of {digits} digits, more than {MAX_JSON_INT_DIGITS}")
    return int(text)


def _shown(text: str) -> str:
    return cut_middle(text, _SHOWN_NUMBER, 16, 8, "{head}...{tail} (a number of {n} characters)")


def non_finite_path(doc: Any) -> tuple[str, float] | None:
    """The key path and value of the first float in ``doc`` that is not finite (NaN or an
    infinity), in document order, or None.  Keys are looked at too (a YAML mapping can have
    float keys); containers seen before (YAML aliases, even recursive ones) are not walked
    again."""
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, val = stack.pop()
        if isinstance(val, float):
            if not math.isfinite(val):
                return path, val
            continue
        if not isinstance(val, (dict, list, tuple)) or id(val) in seen:
            continue
        seen.add(id(val))
        if isinstance(val, dict):
            bad = next((k for k in val if isinstance(k, float) and not math.isfinite(k)), None)
            if bad is not None:
                return path, bad
        stack.extend(reversed(_children(path, val)))  # popped in document order
    return None


def lone_surrogate(doc: Any) -> tuple[str, str, int, bool] | None:
    """The first string of ``doc`` (a value or a key, in document order) that cannot be
    written as UTF-8, or None: a JSON ``\\ud800`` escape decodes to a lone surrogate, which
    no UTF-8 output (a table, a manifest, an error line) can hold.  Returns the key path (of
    the value, or of the object holding the key), the string, the index of its first lone
    surrogate and whether it is a key."""
    stack: list[tuple[str, Any]] = [("", doc)]
    while stack:
        path, val = stack.pop()
        if isinstance(val, str):
            at = _surrogate_at(val)
            if at is not None:
                return path, val, at, False
            continue
        if isinstance(val, dict):
            for key in val:
                if isinstance(key, str) and (at := _surrogate_at(key)) is not None:
                    return path, key, at, True
        stack.extend(reversed(_children(path, val) or ()))  # popped in document order
    return None


def _surrogate_at(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def loads(text: str | bytes, *, strict_objects: bool = True, unique_keys: bool | None = None,
          exact_floats: bool = False) -> Any:
    """Parse ``text``; refuse ``NaN``, ``Infinity``, ``-Infinity`` and numbers beyond a
    double's range (:class:`JsonRule` naming the value's key path), and with
    ``strict_objects`` duplicate keys and integers of more than :data:`MAX_JSON_INT_DIGITS`
    digits.  ``unique_keys`` (default: ``strict_objects``) alone refuses duplicate keys
    (``diff``'s manifests: a third slower to parse, where the integers' rule, a Python call
    per integer, makes it twice).  With ``exact_floats`` a number with a fraction or an
    exponent is a :class:`JsonFloat`.  Other malformed JSON raises ``json.JSONDecodeError`` as
    ``json.loads`` does (a ``ValueError`` too), nesting too deep ``RecursionError``.  Bytes
    are UTF-8 (a ``UnicodeDecodeError`` otherwise), and a byte order mark before the text is
    a :class:`JsonRule` (RFC 8259 8.1: JSON text has none): ``json.loads`` took bytes in
    UTF-16 or -32 or with a UTF-8 BOM, which ``str`` text refuses, so ``diff`` read a
    manifest ``simulate`` refused (found by an exploratory tester)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8")
    if text.startswith("\ufeff"):
        raise JsonRule("a byte order mark (U+FEFF) before the JSON text")
    found: list[str] = []  # the text of the first number that is not finite

    def parse_constant(name: str) -> float:
        if not found:
            found.append(name)
        return float(name)  # looked for by non_finite_path below

    def parse_float(num: str) -> float:
        val = JsonFloat(num) if exact_floats else float(num)
        if not found and not math.isfinite(val):
            found.append(num)
        return val

    kw: dict[str, Any] = {}
    if strict_objects if unique_keys is None else unique_keys:
        kw["object_pairs_hook"] = _no_duplicate_keys
    if strict_objects:
        kw["parse_int"] = _parse_int
    try:
        doc = json.loads(text, parse_constant=parse_constant, parse_float=parse_float, **kw)
    except JsonRule as err:
        if err.path is None and err.why.startswith("duplicate key"):
            err.path = _duplicate_key_path(text)
        elif err.path is None and err.why.startswith("an integer of"):
            err.path = _long_int_path(text)
        raise
    except ValueError as err:
        if isinstance(err, json.JSONDecodeError) or "parse_int" in kw:
            raise
        # CPython's own refusal of an integer of too many digits (its message names
        # sys.set_int_max_str_digits), or text that is not UTF-8: read again with the
        # integers' rule, which names the first such integer as strict reads do
        try:
            json.loads(text, parse_constant=parse_constant, parse_float=parse_float,
                       parse_int=_parse_int, **kw)
        except JsonRule as rule:
            rule.path = rule.path or _long_int_path(text)
            raise rule from None
        raise
    if found:
        at = non_finite_path(doc)  # None: its key was given again (without strict_objects)
        tail = "" if found[0] in ("NaN", "Infinity", "-Infinity") else \
            " (beyond the range of a double)"
        raise JsonRule(f"{_shown(found[0])} is not a finite number{tail}",
                       at[0] if at else None, non_finite=float(found[0]))
    return doc


__all__ = ["JsonFloat", "JsonRule", "MAX_JSON_INT_DIGITS", "lone_surrogate", "loads",
           "non_finite_path"]
