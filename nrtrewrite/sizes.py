"""Byte counts as people write them on a command line: ``4096``, ``512KiB``, ``64MiB``,
``1.5GiB`` (binary), ``1MB`` (decimal), ``512k`` (binary)."""

from __future__ import annotations

import re
from fractions import Fraction

from nrtrewrite.errors import ValidationError, counted, cut_middle

#: A size: white space around it ignored (as an integer option's), spaces between the number
#: and its unit (``64 MiB``), no other white space inside (a line break was taken there
#: until 2026-12-06: ``1`` + line break + ``MiB``)
_SIZE_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?) *([kmgt]?)(i?)(b?)\s*\Z", re.IGNORECASE)

#: The most digits a size's number may have: 40 digits hold far more than any byte count
#: (a trigger counts at most 2^64 - 1 elements, 20 digits); CPython refuses to read an
#: integer of more than 4300 digits, so a longer one was an internal error.
MAX_SIZE_DIGITS = 40

#: What a byte count looks like, for error messages.
EXAMPLES = "e.g. 4096, 512KiB, 64MiB, 1GB"


def parse_size(text: str, field: str = "--bytes") -> int:
    """``64MiB``, ``1MB`` (decimal), ``512K`` / ``512KiB`` (binary), ``4096`` -> bytes,
    exactly (no float rounding); the units K, M, G and T in any case (``_SIZE_RE``); anything
    else a :class:`ValidationError` at ``field``."""
    m = _SIZE_RE.match(text)
    if not m:
        raise ValidationError(f"bad size {text!r} ({EXAMPLES})", field=field)
    num, unit, i, b = m.groups()
    # The integer part's leading zeros are not counted, nor read ("007" is 7; "0.5" has 1
    # digit, "00.5" too); every digit after the point counts (a zero there is part of the
    # value): docs/CLI.md "Errors" (until 2026-12-06 a 0 before the point was counted)
    whole, point, fraction = num.partition(".")
    significant = whole.lstrip("0")
    zeros = len(whole) - len(significant)
    digits = len(significant) + len(fraction)
    num = (significant or "0") + point + fraction
    if digits > MAX_SIZE_DIGITS:
        shown = cut_middle(text.strip()[zeros:] if zeros else text.strip(), 24, 12, 0,
                           "{head}...")
        after = f" after {counted(zeros, 'leading zero')}" if zeros else ""
        raise ValidationError(f"size {shown!r} has {digits} digits{after}, more than "
                              f"{MAX_SIZE_DIGITS}", field=field)
    unit = unit.lower()
    if not unit and i:
        raise ValidationError(f"bad size {text!r} ({EXAMPLES})", field=field)
    base = 1000 if unit and b and not i else 1024
    val = Fraction(num) * base ** " kmgt".index(unit or " ")
    if val.denominator != 1:
        raise ValidationError(f"size {text!r} is not a whole number of bytes", field=field)
    return int(val)


__all__ = ["EXAMPLES", "MAX_SIZE_DIGITS", "parse_size"]
