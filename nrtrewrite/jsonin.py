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
one-line error naming the file (or member) and the key path.  The decoder's hooks see one
object or number, not where it stands: the path of a key given twice or of an integer of too
many digits is found by reading the text again with hooks that mark the rule broken instead of
refusing it (:func:`_first_rule_broken`: one more read, in C), whatever the text holds after it
(another such integer; nesting deeper than the decoder recurses or text that is not JSON,
which a walk of the text that does not recurse gets past: the decoder reads each member of
the document once more, the walk in Python what is in a member it cannot get through).
A text nested too deeply for the decoder is a ``RecursionError`` (``nested too deeply``, no
path: it would be as deep), unless an object the nesting is in already holds a key given twice,
which is named.

``diff`` reads with ``exact_floats``: a number written with a fraction or an exponent is a
:class:`JsonFloat`, which keeps its text, and equals only a ``JsonFloat`` of the same exact
decimal value (``2`` and ``2.0``, ``1725`` and ``1725.0000000000001`` are other values
there, although Python's ``==`` calls them equal).
"""

from __future__ import annotations

import json
import math
import re
import sys
from decimal import Decimal
from json.decoder import scanstring
from json.scanner import make_scanner
from typing import Any

from nrtrewrite.errors import cut_middle, escape_controls

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


def _key_twice(pairs: list[tuple[str, Any]]) -> str | None:
    """The first key of an object's ``pairs`` that an earlier pair holds, or None."""
    if len(dict(pairs)) == len(pairs):  # (in C for the objects without one: most)
        return None
    seen: set = set()
    for key, _ in pairs:
        if key in seen:
            return key
        seen.add(key)
    return None  # (not reached)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise JsonRule(f"duplicate key {_key_twice(pairs)!r}")
    return out


class _Pairs(list):
    """An object's (key, value) pairs as :class:`_Marking` keeps them, a key given twice kept
    twice (a dict keeps its last value only)."""


class _LongInt:
    """Stands for an integer of too many digits in :class:`_Marking`'s read."""


class _Marking:
    """A reader of values by the decoder (in C) whose hooks refuse nothing but mark the first
    rule of :func:`loads` broken, in the order the decoder finds them (its hooks' order):
    ``target`` is the object holding a key given twice (``key``) or stands for an integer of
    too many digits.  The objects read before it (which cannot hold it) are None and every
    number 0, not kept; the objects read after it are :class:`_Pairs`, in which
    :func:`_steps_to` finds it.  No integer is converted: one past CPython's limit after the
    target does not stop the read."""

    __slots__ = ("unique_keys", "int_digits", "target", "why", "key", "_scan")

    def __init__(self, unique_keys: bool, int_digits: bool):
        self.unique_keys, self.int_digits = unique_keys, int_digits
        self.target: Any = None
        self.why: str | None = None
        self.key: str | None = None
        self._scan = make_scanner(json.JSONDecoder(object_pairs_hook=self.pairs,
                                                   parse_int=self.number, parse_float=float,
                                                   parse_constant=float))

    def read(self, text: str, at: int) -> tuple[int, tuple[str, list[str | int]] | None] | None:
        """Read the value at ``at`` (one read): where it ends and the first rule it breaks
        with the keys and indexes to it from the value (``["k", 1, "a"]``), or None for none;
        None when the decoder cannot get through the value (not JSON, nested deeper than it
        recurses)."""
        self.target = self.why = self.key = None
        try:
            value, end = self._scan(text, at)
        except (ValueError, RecursionError, StopIteration):
            return None
        if self.target is None:
            return end, None
        steps = _steps_to(value, self.target)
        return end, (self.why, steps if self.key is None else steps + [self.key])

    def pairs(self, pairs: list[tuple[str, Any]]) -> _Pairs | None:
        if self.target is not None:
            return _Pairs(pairs)
        if self.unique_keys and (key := _key_twice(pairs)) is not None:
            self.target, self.why, self.key = _Pairs(pairs), f"duplicate key {key!r}", key
            return self.target
        return None

    def number(self, num: str) -> Any:
        if self.target is None and self.int_digits:
            digits = len(num) - num.startswith("-")
            if digits > MAX_JSON_INT_DIGITS:
                self.target, self.why = _LongInt(), _long_int_why(digits)
                return self.target
        return 0


def _steps_to(value: Any, target: Any) -> list[str | int]:
    """The keys and indexes from ``value`` (read by :class:`_Marking`) to ``target``, which
    it holds (a loop: the value may be nested as deep as the decoder reads)."""
    stack: list[tuple[Any, tuple | None]] = [(value, None)]  # (a value, (its parent's, step))
    while stack:
        val, where = stack.pop()
        if val is target:
            steps: list[str | int] = []
            while where is not None:
                where, step = where
                steps.append(step)
            return steps[::-1]
        members = val if type(val) is _Pairs else enumerate(val) if type(val) is list else ()
        stack.extend((sub, (where, step)) for step, sub in members
                     if sub is target or type(sub) in (list, _Pairs))
    raise AssertionError("the marked value is not in the value read")  # (not reached)


class _Open:
    """A container :func:`_first_rule_broken` is inside: an object (``keys``: the keys read,
    ``twice``: its first key read a second time) or an array; ``step`` is the key or the
    index of the value being read in it."""

    __slots__ = ("is_object", "step", "keys", "twice")

    def __init__(self, is_object: bool, step: str | int):
        self.is_object, self.step, self.keys, self.twice = is_object, step, set(), None


def joined_key(path: str, key: Any) -> str:
    """Key path ``path`` (``""``: the document itself) with the mapping key ``key`` after it:
    ``path.key`` for a key that is a plain name (letters, digits, ``_`` and ``-``), else the
    key as a JSON string in brackets, ``path["a.b"]``, ``path["x[0]"]``, ``path[""]``: a key
    holding a dot, a bracket or a space would read as other steps (``a.b`` as the key ``b``
    of ``a``).  ``diff`` writes its key paths so (CLI.md: ``files["cce.bin"].sha256``).  A key
    that is no string (a YAML spec's ``1``, ``null``, ``1.5``) is written as JSON writes the
    value (``str()`` of another, escaped once: ``errors.escape_controls``; ``bytes``, whose
    ``str()`` is a ``repr`` that escapes it already, as it is), in brackets unless it is a
    plain name: a key whose ``str()`` holds a line break and one holding a backslash then
    ``n`` never give one path (until 2026-12-05 such a ``str()`` was only guarded)."""
    if isinstance(key, str):
        if key and all(c.isalnum() or c in "_-" for c in key):
            return f"{path}.{key}" if path else key
        return f"{path}[{json.dumps(key)}]"
    if key is None or isinstance(key, (bool, int, float)):
        text = json.dumps(key)
    elif isinstance(key, bytes):
        text = str(key)  # b'a\nb': a repr
    else:
        text = escape_controls(str(key))
    if text and all(c.isalnum() or c in "_-" for c in text):
        return f"{path}.{text}" if path else text
    return f"{path}[{text}]"


def _path(steps: list[str | int]) -> str | None:
    """The key path (``a.c[1].d``, :func:`joined_key`) of keys and indexes ``steps``; None
    for none."""
    path = ""
    for step in steps:
        path = f"{path}[{step}]" if isinstance(step, int) else joined_key(path, step)
    return path or None


def _joined(opened: list[_Open], key: str | None = None) -> str | None:
    """The key path of the value read in the innermost of ``opened``, or of its key ``key``;
    None for the document itself."""
    return _path([o.step for o in opened] + ([] if key is None else [key]))


_SPACE = re.compile(r"[ \t\n\r]*")
#: A value that is no string nor container, as the decoder reads it (its groups: an
#: integer's digits, then a fraction, an exponent; none for the words).
_SCALAR = re.compile(r"(-?(?:0|[1-9][0-9]*))(\.[0-9]+)?([eE][-+]?[0-9]+)?"
                     r"|true|false|null|NaN|Infinity|-Infinity")


def _first_rule_broken(text: str, *, unique_keys: bool, int_digits: bool,
                       depth: int | None = None) -> JsonRule | None:
    """The first rule of :func:`loads` that ``text`` breaks, in the order the decoder finds
    them, naming its key path: with ``unique_keys`` a key given twice, when its object closes
    (as :func:`_no_duplicate_keys` sees it), with ``int_digits`` an integer of more than
    :data:`MAX_JSON_INT_DIGITS` digits, when it is read; None when the text breaks neither
    before it ends or stops being JSON (an error's cost only).

    The document is read by the decoder once (:meth:`_Marking.read`, which breaks off at no
    rule and finds the path in the value read).  When the decoder cannot get through it
    (nesting deeper than it recurses, text that is not JSON, after the rule or before it),
    the text is walked in a loop, no recursion: each member of the document is read by the
    decoder once, and a member it cannot get through is entered and walked by the loop,
    nothing in it read by the decoder again.  A character is read here by the decoder at
    most twice whatever the nesting, and by the loop (in Python) at most once: reading each
    container on the way down by the decoder again, where the one holding it had failed, cost
    the nesting's depth times the text (27 s for 200 KB 900 deep).  With ``depth`` the walk
    enters no container ``depth`` levels deep: it stops there, naming a key given twice in
    an object still open (the innermost), which is wrong whatever follows."""
    marking = _Marking(unique_keys, int_digits)
    opened: list[_Open] = []
    at = _SPACE.match(text).end()
    try:
        while True:
            # a value at ``at``: read by the decoder (the document, its members), or a
            # container entered (its first key or item is next), or a string or scalar
            read = marking.read(text, at) if len(opened) <= 1 and \
                text.startswith(("{", "["), at) else None
            if read is not None:
                at, found = read
                if found is not None:
                    why, steps = found
                    return JsonRule(why, _path([o.step for o in opened] + steps))
            elif text.startswith(("{", "["), at):
                if depth is not None and len(opened) >= depth:
                    return _innermost_key_twice(opened)
                is_object = text[at] == "{"
                at = _SPACE.match(text, at + 1).end()
                if not text.startswith("}" if is_object else "]", at):
                    opened.append(_Open(is_object, 0))
                    at = _read_key(text, at, opened[-1], unique_keys) if is_object else at
                    continue
                at += 1
            elif text.startswith('"', at):
                at = scanstring(text, at + 1)[1]
            else:
                m = _SCALAR.match(text, at)
                if m is None:
                    return None
                integer, fraction, exponent = m.groups()
                if int_digits and integer and not (fraction or exponent):
                    digits = len(integer) - integer.startswith("-")
                    if digits > MAX_JSON_INT_DIGITS:
                        return JsonRule(_long_int_why(digits), _joined(opened))
                at = m.end()
            # the value read: the next item or key of its container, or the container's end
            while opened:
                inner = opened[-1]
                at = _SPACE.match(text, at).end()
                if text.startswith(",", at):
                    at = _SPACE.match(text, at + 1).end()
                    if inner.is_object:
                        at = _read_key(text, at, inner, unique_keys)
                    else:
                        inner.step += 1
                    break
                if not text.startswith("}" if inner.is_object else "]", at):
                    return None
                at += 1
                opened.pop()
                if inner.twice is not None:
                    return JsonRule(f"duplicate key {inner.twice!r}", _joined(opened, inner.twice))
            else:
                return None
    except ValueError:  # (scanstring's, _read_key's: the text is not JSON there)
        return None


def _innermost_key_twice(opened: list[_Open]) -> JsonRule | None:
    """The key given twice in the innermost of the objects ``opened`` that has one, or None."""
    for i in reversed(range(len(opened))):
        if opened[i].twice is not None:
            return JsonRule(f"duplicate key {opened[i].twice!r}",
                            _joined(opened[:i], opened[i].twice))
    return None


def _read_key(text: str, at: int, obj: _Open, unique_keys: bool) -> int:
    """Read the key at ``at`` of the object ``obj`` and its colon: where its value starts.
    A ValueError when the text is no key there."""
    if not text.startswith('"', at):
        raise ValueError("no key")
    key, at = scanstring(text, at + 1)
    obj.step = key
    if unique_keys:
        if key in obj.keys and obj.twice is None:
            obj.twice = key
        obj.keys.add(key)
    at = _SPACE.match(text, at).end()
    if not text.startswith(":", at):
        raise ValueError("no colon")
    return _SPACE.match(text, at + 1).end()


def _with_path(rule: JsonRule, text: str, unique_keys: bool, int_digits: bool) -> JsonRule:
    """``rule``, a key given twice or an integer of too many digits as the decoder's hooks
    raise it (they see one object or number, not where it is), with its key path: the
    first rule :func:`_first_rule_broken` finds, the same one."""
    found = _first_rule_broken(text, unique_keys=unique_keys, int_digits=int_digits)
    if rule.path is None and found is not None and found.why == rule.why:
        rule.path = found.path
    return rule


def _long_int_why(digits: int) -> str:
    return f"an integer of {digits} digits, more than {MAX_JSON_INT_DIGITS}"


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > MAX_JSON_INT_DIGITS:
        raise JsonRule(_long_int_why(digits))
    return int(text)


def _children(path: str, val: Any) -> list[tuple[str, Any]] | None:
    """A container's members with their key paths (``a.b``, ``a[2]``, ``a["b.c"]``:
    :func:`joined_key`), in document order; None for a value that is no container."""
    if isinstance(val, dict):
        return [(joined_key(path, k), sub) for k, sub in val.items()]
    if isinstance(val, (list, tuple)):
        return [(f"{path}[{i}]", sub) for i, sub in enumerate(val)]
    return None


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
    surrogate and whether it is a key.

    A document JSON can write is first written whole and encoded (at C speed, linear in
    the document): when that succeeds no string is a lone surrogate, and no key path is
    built; the walk, which builds one for every value (two thirds of the time a topology
    file of 3 million links took to load), runs only to find the one that failed, or for a
    document JSON cannot write (a YAML spec's)."""
    try:
        json.dumps(doc, ensure_ascii=False, allow_nan=True).encode("utf-8")
        return None
    except (UnicodeEncodeError, TypeError, ValueError, RecursionError):
        pass  # (a lone surrogate somewhere, or no JSON document: the walk says which)
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


class _InnerObject:
    """The type of :data:`INNER_OBJECT`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INNER_OBJECT"


#: What :func:`loads` with ``top_only`` gives in place of each object inside the top-level
#: one (read and checked, not kept).
INNER_OBJECT = _InnerObject()


def loads(text: str | bytes, *, strict_objects: bool = True, unique_keys: bool | None = None,
          exact_floats: bool = False, top_only: bool = False) -> Any:
    """Parse ``text``; refuse ``NaN``, ``Infinity``, ``-Infinity`` and numbers beyond a
    double's range (:class:`JsonRule` naming the value's key path), and with
    ``strict_objects`` duplicate keys and integers of more than :data:`MAX_JSON_INT_DIGITS`
    digits.  ``unique_keys`` (default: ``strict_objects``) alone refuses duplicate keys
    (``diff``'s manifests: a third slower to parse, where the integers' rule, a Python call
    per integer, makes it twice).  With ``exact_floats`` a number with a fraction or an
    exponent is a :class:`JsonFloat`.  Other malformed JSON raises ``json.JSONDecodeError`` as
    ``json.loads`` does (a ``ValueError`` too), nesting too deep ``RecursionError`` (a key
    given twice before it, in an object the nesting is in: that :class:`JsonRule`).  Bytes
    are UTF-8 (a ``UnicodeDecodeError`` otherwise), and a byte order mark before the text is
    a :class:`JsonRule` (RFC 8259 8.1: JSON text has none): ``json.loads`` took bytes in
    UTF-16 or -32 or with a UTF-8 BOM, which ``str`` text refuses, so ``diff`` read a
    manifest ``simulate`` refused (found by an exploratory tester).

    With ``top_only`` every object inside the top-level one is read and checked by the same
    rules but given as :data:`INNER_OBJECT`, not built (a 34 MB manifest whose top-level keys
    alone are wanted, in about a third of the memory and half the time); the top-level
    object is a dict of its members.  A document it refuses is refused as without it (a
    number that is not finite: the document is read again whole, to name its key path)."""
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
    unique = strict_objects if unique_keys is None else unique_keys
    if unique:
        kw["object_pairs_hook"] = _no_duplicate_keys
    last: list = [None]  # top_only: the members of the object read last
    if top_only:
        def inner(pairs: list[tuple[str, Any]]) -> _InnerObject:
            if unique and len(dict(pairs)) != len(pairs):
                raise JsonRule(f"duplicate key {_key_twice(pairs)!r}")
            last[0] = pairs
            return INNER_OBJECT
        kw["object_pairs_hook"] = inner
    if strict_objects:
        kw["parse_int"] = _parse_int
    try:
        doc = json.loads(text, parse_constant=parse_constant, parse_float=parse_float, **kw)
    except JsonRule as err:  # a key given twice, an integer of too many digits: no path
        raise _with_path(err, text, unique, True) from None
    except RecursionError:
        # nested deeper than the decoder recurses: a key given twice in an object still
        # open where the nesting passes half the interpreter's recursion limit (which the
        # decoder passed: it stops short of the limit by the frames under it) is named,
        # wrong whatever follows; else the RecursionError stands (``nested too deeply``)
        rule = _first_rule_broken(text, unique_keys=unique, int_digits=strict_objects,
                                  depth=sys.getrecursionlimit() // 2) if unique else None
        if rule is None:
            raise
        raise rule from None
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
            raise _with_path(rule, text, unique, True) from None
        raise
    if top_only:
        if found:  # (its key path is in an object not kept: read again whole, to name it)
            return loads(text, strict_objects=strict_objects, unique_keys=unique_keys,
                         exact_floats=exact_floats)
        if doc is INNER_OBJECT:  # the top-level object: the last one whose end was read
            return dict(last[0])
    if found:
        at = non_finite_path(doc)  # None: its key was given again (without strict_objects)
        tail = "" if found[0] in ("NaN", "Infinity", "-Infinity") else \
            " (beyond the range of a double)"
        raise JsonRule(f"{_shown(found[0])} is not a finite number{tail}",
                       at[0] if at else None, non_finite=float(found[0]))
    return doc


__all__ = ["INNER_OBJECT", "JsonFloat", "JsonRule", "MAX_JSON_INT_DIGITS", "joined_key",
           "lone_surrogate", "loads", "non_finite_path"]
